"""Every source's values go through the kernel's one conversion and type check, and a wrong
value is a problem that names its source: the command line, a config file, an environment
variable, the caller's defaults (``--defaults`` / ``args_defaults``) or a checkpoint.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from pathlib import Path
from typing import Any

import pytest

from reliability_support import MINIMAL, resolve_environment

from megaplug.cli import main
from megaplug.megatron import ConfigError, parse_and_validate_args

torch = pytest.importorskip("torch")

WITHOUT_LAYERS = MINIMAL[2:]  # MINIMAL starts with --num-layers 2
assert MINIMAL[:2] == ["--num-layers", "2"]


def cli(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment("1", **(environ or {})), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def problems(argv: list[str], **kwargs: Any) -> list[Any]:
    with resolve_environment("1"), pytest.raises(ConfigError) as info:
        parse_and_validate_args(argv=argv, torch_types=False, register=False, **kwargs)
    found = list(info.value.problems)
    assert not [p for p in found if " raised " in p.message], found
    return found


def write_checkpoint(root: Path, version: Any = 3.0, **saved: Any) -> Path:
    path = root / "iter_0000010" / "mp_rank_00"
    path.mkdir(parents=True)
    torch.save({"args": argparse.Namespace(**saved), "iteration": 10,
                "checkpoint_version": version}, path / "model_optim_rng.pt")
    (root / "latest_checkpointed_iteration.txt").write_text("10")
    return path / "model_optim_rng.pt"


# -- the same wrong value from each source -------------------------------------------------

def test_a_wrong_num_layers_is_refused_from_every_source_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("num_layers: [4]\n")
    found = problems(["--config", str(config), *WITHOUT_LAYERS])
    assert [p.message for p in found] == [
        f"--num-layers in config file {config}: expected int, got [4]"]
    found = problems(WITHOUT_LAYERS, args_defaults={"num_layers": "four"})
    assert [(p.message, p.plugin) for p in found] == [(
        "num_layers in the caller's defaults: invalid int value 'four' (invalid literal for "
        "int() with base 10: 'four')", "model")]
    found = problems(["--num-layers", "four", *WITHOUT_LAYERS])
    assert found[0].message.startswith("--num-layers: invalid int value 'four'")
    path = write_checkpoint(tmp_path / "ckpt", num_layers=torch.tensor(4))
    found = problems([*WITHOUT_LAYERS, "--load", str(tmp_path / "ckpt"),
                      "--use-checkpoint-args"])
    assert [(p.message, p.flags, p.plugin) for p in found] == [(
        f"num_layers in the checkpoint arguments of {path}: expected int, got tensor(4) "
        "(a torch.Tensor)", ("--num-layers",), "model")]


def test_a_wrong_environment_variable_names_the_variable() -> None:
    code, _, err = cli("resolve", "--", *MINIMAL, environ={"WORLD_SIZE": "eight"})
    assert code == 2
    assert "environment variable WORLD_SIZE='eight' is not valid" in err


# -- checkpoints ----------------------------------------------------------------------------

@pytest.mark.parametrize(("saved", "expected"), [
    ({"num_layers": torch.tensor(4)}, "num_layers in the checkpoint arguments of {path}: "
                                      "expected int, got tensor(4) (a torch.Tensor)"),
    ({"tokenizer_type": True}, "tokenizer_type in the checkpoint arguments of {path}: "
                               "expected str, got True"),
    ({"swiglu": 1}, "swiglu in the checkpoint arguments of {path}: expected true or false, "
                    "got 1"),
    ({"hidden_size": 64.5}, "hidden_size in the checkpoint arguments of {path}: expected int, "
                            "got 64.5"),
    ({"rotary_percent": float("nan")}, "rotary_percent in the checkpoint arguments of {path}: "
                                       "nan is not a finite number"),
    ({"normalization": "BatchNorm"}, "normalization in the checkpoint arguments of {path}: "
                                     "invalid choice 'BatchNorm'"),
    ({"disable_bias_linear": "yes"}, "add_bias_linear in the checkpoint arguments of {path}: "
                                     "expected true or false, got 'yes'"),
    ({"virtual_pipeline_model_parallel_size": torch.tensor(2)},
     "virtual_pipeline_model_parallel_size in the checkpoint arguments of {path}: expected a "
     "plain value, got tensor(2) (a torch.Tensor)"),
])
def test_a_checkpoints_wrong_value_is_a_problem_naming_the_checkpoint(
        tmp_path: Path, saved: dict[str, Any], expected: str) -> None:
    path = write_checkpoint(tmp_path, **saved)
    # settings the checkpoint only fills where the command line left them unset
    unset = {"--" + name.replace("_", "-") for name in saved}
    base = [token for pair in zip(MINIMAL[::2], MINIMAL[1::2]) if pair[0] not in unset
            for token in pair]
    found = problems([*base, "--load", str(tmp_path), "--use-checkpoint-args",
                      "--use-mp-args-from-checkpoint-args"])
    assert expected.format(path=path) in [p.message for p in found]


def test_a_checkpoints_loosely_typed_values_are_converted(tmp_path: Path) -> None:
    """A whole float for an int, an int for a float: converted as from a config file."""
    write_checkpoint(tmp_path, num_layers=4.0, rotary_percent=1, swiglu=True)
    with resolve_environment("1"):
        args = parse_and_validate_args(argv=[*WITHOUT_LAYERS, "--load", str(tmp_path),
                                             "--use-checkpoint-args"],
                                       torch_types=False, register=False)
    assert (args.num_layers, type(args.num_layers)) == (4, int)
    assert (args.rotary_percent, type(args.rotary_percent)) == (1.0, float)
    assert args.swiglu is True


@pytest.mark.parametrize("version", ["3.0", torch.tensor(3.0), [3]])
def test_a_checkpoint_version_that_is_not_a_number_is_a_problem(tmp_path: Path,
                                                                 version: Any) -> None:
    path = write_checkpoint(tmp_path, version=version, num_layers=4)
    found = problems([*MINIMAL, "--load", str(tmp_path), "--use-checkpoint-args"])
    assert [p.message for p in found] == [
        f"{path}: checkpoint_version is {version!r}, not a number; the checkpoint is corrupt "
        "or was not written by Megatron"]


def test_a_self_referencing_saved_value_is_refused_not_looped(tmp_path: Path) -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    looped.append(torch.tensor(1))
    path = write_checkpoint(tmp_path, virtual_pipeline_model_parallel_size=looped)
    found = problems([*MINIMAL, "--load", str(tmp_path), "--use-checkpoint-args",
                      "--use-mp-args-from-checkpoint-args"])
    assert [p.message.partition(": ")[0] for p in found] == [
        f"virtual_pipeline_model_parallel_size in the checkpoint arguments of {path}"]


# -- caller defaults ---------------------------------------------------------------------------

@pytest.mark.parametrize(("defaults", "expected"), [
    ('{"tensor_model_parallel_size": "two"}',
     "tensor_model_parallel_size in the caller's defaults: invalid int value 'two'"),
    ('{"tensor_model_parallel_size": true}',
     "tensor_model_parallel_size in the caller's defaults: expected int, got True"),
    ('{"global_batch_size": 8.5}', "global_batch_size in the caller's defaults: expected int, "
                                   "got 8.5"),
    ('{"tokenizer_type": false}', "tokenizer_type in the caller's defaults: expected str, got "
                                  "False"),
    ('{"use_distributed_optimizer": "yes"}', "use_distributed_optimizer in the caller's "
                                             "defaults: expected true or false, got 'yes'"),
    ('{"lr": Infinity}', "lr in the caller's defaults: inf is not a finite number"),
])
def test_a_wrong_caller_default_names_the_defaults_never_a_plugin_bug(defaults: str,
                                                                      expected: str) -> None:
    """Reported where unused too (the setting has a value): a wrong default is the caller's
    bug wherever it would land."""
    code, _, err = cli("resolve", "--defaults", defaults, "--", *MINIMAL)
    assert code == 2, err
    assert expected in err
    assert " raised " not in err and "bug in the plugin" not in err


def test_args_defaults_are_checked_like_defaults_from_the_command_line() -> None:
    found = problems(MINIMAL, args_defaults={"pipeline_model_parallel_size": [2],
                                             "seed": torch.tensor(3)})
    assert sorted(p.message for p in found) == [
        "pipeline_model_parallel_size in the caller's defaults: expected int, got [2]",
        "seed in the caller's defaults: expected int, got tensor(3) (a torch.Tensor)"]
