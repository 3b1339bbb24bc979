"""Config files and checkpoints are untrusted input: read safely, refused clearly.

* Config files: ``yaml.safe_load`` only (``!!python/...`` tags refused, never run), alias
  bombs, deep nesting, binary and mistyped values refused with a problem naming the file.
* ``--use-checkpoint-args --load DIR``, end to end through
  ``megaplug.megatron.parse_and_validate_args``: a checkpoint written the way
  ``examples/train_gpt.py`` writes one (``torch.save`` of args, model, optimizer and RNG
  state) applies its saved architecture; one carrying any other pickled object (a
  ``__reduce__`` calling ``os.system``) is refused before anything is constructed.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import io
import os
import random
from pathlib import Path
from typing import Any

import pytest

import megaplug.megatron

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main
from megaplug.megatron import parse_and_validate_args

NO_GPU = megaplug.TargetEnvironment(device_capability=None)


def _problems(argv: list[str], files: list[str]) -> list[megaplug.Problem]:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *argv], config_files=files, environ={}, target=NO_GPU)
    return list(info.value.problems)


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


# -- config files ----------------------------------------------------------------------

def _hostile_yaml(marker: Path) -> dict[str, str]:
    return {
        "apply": f'num_layers: !!python/object/apply:os.system ["touch {marker}"]\n',
        "object": "num_layers: !!python/object:argparse.Namespace {a: 1}\n",
        "name": "num_layers: !!python/name:os.system\n",
        "new": f'lr: !!python/object/new:subprocess.check_output [["touch", "{marker}"]]\n',
        "module": "lr: !!python/module:os\n",
    }


@pytest.mark.parametrize("kind", ["apply", "object", "name", "new", "module"])
def test_yaml_python_tags_are_refused_and_never_run(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.yaml"
    path.write_text(_hostile_yaml(marker)[kind])
    problems = _problems(MINIMAL, [str(path)])
    assert any(f"config file {path} uses a YAML tag megaplug will not construct" in p.message
               and "python/" in p.message for p in problems), problems
    code, err = _cli("resolve", "--assume-device-capability", "none", "--config", str(path),
                     "--", *MINIMAL)
    assert code == 2 and "will not construct" in err and "Traceback" not in err
    assert not marker.exists()


BAD_FILES = {
    "bomb.yaml": ("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                  + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
                            for p, n in zip("abcdefg", "bcdefgh"))
                  + "data_path: [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
                  "expands to more than"),
    "loop.yaml": ("data_path: &a [x, *a]\n", "expands to more than"),
    "deep.yaml": ("num_layers: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "deep.json": ('{"num_layers": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deeply"),
    "binary.yaml": (b"\xff\xfe\x00garbage\x80", "is not UTF-8 text"),
    "list.yaml": ("[1, 2, 3]\n", "must hold a mapping of settings, not list"),
    "broken.yaml": ("num_layers: [1\n", "is not valid YAML"),
    "broken.json": ('{"num_layers": }', "is not valid JSON"),
    "float_int.yaml": ("num_layers: 2.5\n", "--num-layers in config file"),
    "inf_int.json": ('{"num_layers": 1e999}', "expected int, got inf"),
    "list_int.yaml": ("hidden_size: [64]\n", "--hidden-size in config file"),
    "bool_int.yaml": ("hidden_size: true\n", "expected int, got True"),
    "map_str.yaml": ("data_path: {a: 1}\n", "--data-path in config file"),
    "text_bool.yaml": ("bf16: 'yes'\n", "expected true or false"),
    "pattern_map.yaml": ("no_rope_freq: {a: 1}\n", "--no-rope-freq in config file"),
    "pattern_nested.yaml": ("moe_layer_freq: [[1], x]\n", "--moe-layer-freq in config file"),
    "computed.yaml": ("data_parallel_size: 4\n", "is computed by plugin"),
    "missing.yaml": (None, "cannot read config file"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_malformed_config_files_are_clear_problems(tmp_path: Path, name: str) -> None:
    content, text = BAD_FILES[name]
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content)
    problems = _problems(MINIMAL, [str(path)])
    assert any(text in p.message and str(path) in p.message for p in problems), problems
    assert not any(" raised " in p.message for p in problems), problems


def test_structured_values_in_a_config_file_still_parse(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("num_layers: 4.0\nnum_experts: 4\nmoe_layer_freq: [1, 0, 1, 0]\n"
                    "lr: 1\nattention_backend: AttnBackend.flash\ndata_path: [a, 2]\n")
    kernel, rest = megaplug.load([])
    argv = [a for a in MINIMAL]
    del argv[0:2]  # --num-layers comes from the file
    argv = [token for token in argv if token not in ("--lr", "1e-4")]
    resolved = kernel.resolve(argv, config_files=[str(path)], environ={}, target=NO_GPU)
    assert resolved.num_layers == 4 and isinstance(resolved.num_layers, int)
    assert resolved.moe_layer_freq == [1, 0, 1, 0]
    assert resolved.lr == 1.0 and isinstance(resolved.lr, float)
    assert resolved.attention_backend.name == "flash"
    assert resolved.data_path == ["a", "2"]


# -- checkpoints -----------------------------------------------------------------------

torch = pytest.importorskip("torch")


class _Payload:
    """Unpickling this would run a shell command that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class _Foreign:
    def __init__(self) -> None:
        self.value = 1


def _plain(value: Any) -> Any:
    """What ``examples/train_gpt.py`` stores: plain values, dtypes and enums."""
    if value is None or isinstance(value, (bool, int, float, str, enum.Enum, torch.dtype)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def _saved_args(**overrides: str) -> argparse.Namespace:
    """A real resolved namespace, as a training run would save it."""
    argv = ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "8",
            "--seq-length", "128", "--max-position-embeddings", "256", "--micro-batch-size", "2",
            "--train-iters", "10", "--lr", "1e-4", "--swiglu", "--bf16",
            "--attention-backend", "flash"]
    args = parse_and_validate_args(argv=argv, environ={}, target=NO_GPU)
    values = {k: _plain(v) for k, v in vars(args).items() if not k.startswith("_")}
    values.update(overrides)
    return argparse.Namespace(**values)


def _write_checkpoint(root: Path, args: Any, iteration: int = 10, **extra: Any) -> Path:
    """Megatron's layout, as ``examples/train_gpt.py`` writes it."""
    path = root / f"iter_{iteration:07d}" / "mp_rank_00" / "model_optim_rng.pt"
    path.parent.mkdir(parents=True)
    state = {
        "args": args,
        "checkpoint_version": 3.0,
        "iteration": iteration,
        "model": {"embedding.weight": torch.zeros(4, 2)},
        "optimizer": {"optimizer": {"state": {}, "param_groups": [{"lr": 1e-4, "params": [0]}]}},
        "opt_param_scheduler": {"num_steps": 20},
        "rng_state": [{"random_rng_state": random.getstate(),
                       "torch_rng_state": torch.get_rng_state()}],
        **extra,
    }
    torch.save(state, path)
    (root / "latest_checkpointed_iteration.txt").write_text(f"{iteration}\n")
    return path


RESUME = ["--seq-length", "128", "--max-position-embeddings", "256", "--micro-batch-size", "2",
          "--train-iters", "20", "--lr", "1e-4", "--bf16"]


def _resume(root: Path) -> argparse.Namespace:
    return parse_and_validate_args(argv=[*RESUME, "--use-checkpoint-args", "--load", str(root)],
                                   environ={}, target=NO_GPU)


def test_a_good_checkpoint_applies_its_saved_architecture(tmp_path: Path) -> None:
    _write_checkpoint(tmp_path / "ckpt", _saved_args())
    args = _resume(tmp_path / "ckpt")
    assert (args.num_layers, args.hidden_size, args.num_attention_heads) == (4, 128, 8)
    assert args.swiglu is True
    assert args.params_dtype == torch.bfloat16
    provenance = megaplug.megatron.provenance(args)["num_layers"]
    assert any(step.source == "checkpoint" for step in provenance.history())


MALICIOUS = {
    "in_args": lambda marker: {"args": _saved_args(evil=_Payload(marker))},
    "beside_args": lambda marker: {"args": _saved_args(), "extra": {"hook": _Payload(marker)}},
    "as_args": lambda marker: {"args": _Payload(marker)},
    "foreign_class": lambda marker: {"args": _saved_args(evil=_Foreign())},
}


@pytest.mark.parametrize("kind", sorted(MALICIOUS))
def test_a_malicious_checkpoint_is_refused_and_never_runs(tmp_path: Path, kind: str) -> None:
    marker = tmp_path / "pwned"
    state = MALICIOUS[kind](marker)
    _write_checkpoint(tmp_path / "ckpt", state.pop("args"), **state)
    assert not marker.exists()  # saving does not run the payload; only unpickling would
    with pytest.raises(megaplug.ConfigError) as info:
        _resume(tmp_path / "ckpt")
    refused = [p for p in info.value.problems if "refusing to read" in p.message]
    assert refused and "allow-list" in refused[0].message, info.value
    assert refused[0].plugin == "checkpointing" and refused[0].hint
    assert "--use-checkpoint-args" in refused[0].flags
    code, err = _cli("resolve", "--assume-device-capability", "none", "--",
                     *RESUME, "--use-checkpoint-args", "--load", str(tmp_path / "ckpt"))
    assert code == 2 and "refusing to read" in err and "Traceback" not in err
    assert not marker.exists()


ARCHITECTURE = ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "8"]


@pytest.mark.parametrize("content", ["", "not-a-number\n", "-3\n", "../../etc\n"])
def test_a_bad_tracker_file_is_a_clear_message(tmp_path: Path, content: str) -> None:
    """Like Megatron: no readable checkpoint is a warning, an error with --exit-on-missing-..."""
    root = tmp_path / "ckpt"
    root.mkdir()
    (root / "latest_checkpointed_iteration.txt").write_text(content)
    argv = [*RESUME, *ARCHITECTURE, "--use-checkpoint-args", "--load", str(root)]
    args = parse_and_validate_args(argv=argv, environ={}, target=NO_GPU)
    warnings = megaplug.megatron.resolution_warnings(args)
    assert any("latest_checkpointed_iteration.txt" in str(w) for w in warnings)
    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(argv=[*argv, "--exit-on-missing-checkpoint"], environ={},
                                target=NO_GPU)
    assert any("latest_checkpointed_iteration.txt" in p.message and p.hint
               for p in info.value.problems), info.value


def test_a_truncated_checkpoint_file_is_a_clear_problem(tmp_path: Path) -> None:
    path = _write_checkpoint(tmp_path / "ckpt", _saved_args())
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(megaplug.ConfigError) as info:
        _resume(tmp_path / "ckpt")
    assert any("corrupt or truncated" in p.message for p in info.value.problems), info.value
    assert not any("allow-list" in p.message for p in info.value.problems)
