"""The rest of megatron.training.arguments' surface, against Megatron's own functions:
global registration, checkpoints across the two, the group adders, the pattern helpers,
and extra_args_providers written the way real entry scripts write them."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

import reference as ref
from test_drop_in import compare_namespaces

import megaplug.megatron as facade

SMALL = {
    "argv": ["--num-layers", "4", "--hidden-size", "128", "--num-attention-heads", "8",
             "--seq-length", "64", "--max-position-embeddings", "64", "--micro-batch-size", "2",
             "--global-batch-size", "8", "--train-iters", "10", "--lr", "1e-4",
             "--tokenizer-type", "NullTokenizer", "--vocab-size", "512", "--bf16",
             "--transformer-impl", "local"],
    "env": {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"},
    "args_defaults": {},
    "assume": {"packages": {"transformer_engine": "2.17.1"}, "device_capability": [9, 0]},
}


def with_argv(*extra: str) -> dict:
    return {**SMALL, "argv": [*SMALL["argv"], *extra]}


@pytest.fixture
def megatron_globals():
    from megatron.core import config as core_config
    from megatron.training import global_vars

    yield global_vars
    global_vars.unset_global_variables()
    core_config.set_experimental_flag(False)


def test_parse_and_validate_args_registers_like_megatron(megatron_globals):
    from megatron.core import config as core_config
    from megatron.training import get_args

    args = ref.megaplug_args(with_argv("--enable-experimental"), register=True)
    assert get_args() is args
    assert megatron_globals.get_timers() is not None  # what pretrain() reads next
    assert args.padded_vocab_size is not None  # set by building the tokenizer
    assert core_config.is_experimental_enabled() is True
    with pytest.raises(AssertionError, match="args is already initialized"):
        ref.megaplug_args(SMALL, register=True)


def test_config_error_is_an_assertion_error_with_every_problem():
    with pytest.raises(AssertionError) as info:
        ref.megaplug_args(with_argv("--num-attention-heads", "6", "--hidden-size", "100",
                                    "--no-such-flag", "1"))
    assert isinstance(info.value, facade.ConfigError)
    assert len(info.value.problems) >= 2


def _save_checkpoint(directory: Path, args: argparse.Namespace, iteration: int = 10) -> None:
    import torch

    path = directory / f"iter_{iteration:07d}" / "mp_rank_00"
    path.mkdir(parents=True)
    torch.save({"args": args, "checkpoint_version": 3.0, "iteration": iteration},
               path / "model_optim_rng.pt")
    (directory / "latest_checkpointed_iteration.txt").write_text(str(iteration))


def test_megaplug_args_saved_in_a_checkpoint_load_with_megatrons_loader(tmp_path):
    from megatron.training.checkpointing import load_args_from_checkpoint

    saved = ref.megaplug_args(with_argv("--num-layers", "6", "--swiglu"))
    _save_checkpoint(tmp_path, saved)
    resuming = ref.megatron_args(with_argv("--load", str(tmp_path), "--ckpt-format", "torch",
                                           "--use-checkpoint-args"))
    resuming.num_layers = None  # load_args_from_checkpoint fills unset architecture values
    with ref.targeting(SMALL):
        loaded = load_args_from_checkpoint(resuming)
    if isinstance(loaded, tuple):  # (args, checkpoint_args) in this release
        loaded = loaded[0]
    assert loaded.num_layers == 6 and loaded.swiglu is True
    assert type(loaded.attention_backend) is type(ref.megatron_args(SMALL).attention_backend)


def test_megatrons_checkpoint_args_load_in_megaplug(tmp_path):
    saved = ref.megatron_args(with_argv("--num-layers", "6", "--swiglu"))
    _save_checkpoint(tmp_path, saved)
    case = {**SMALL, "argv": [a for a in SMALL["argv"]] + ["--load", str(tmp_path),
                                                            "--use-checkpoint-args"]}
    case["argv"][1] = "2"  # --num-layers 2 on the command line; the checkpoint has 6 ...
    args = ref.megaplug_args(case)
    assert args.swiglu is True  # ... and forces the model's shape settings
    assert facade.provenance(args)["swiglu"].source == "checkpoint"
    assert type(args.attention_backend) is type(saved.attention_backend)


def _megatron_adders() -> list[str]:
    import megatron.training.arguments as arguments

    return sorted(name for name in vars(arguments) if name.startswith("_add_")
                  and callable(getattr(arguments, name)) and name in facade.GROUP_ADDERS)


@pytest.mark.parametrize("name", _megatron_adders())
def test_group_adder_adds_what_megatrons_adds(name):
    import megatron.training.arguments as arguments
    from test_drop_in import ONLY_IN_MEGAPLUG, ONLY_IN_RELEASE

    theirs = getattr(arguments, name)(argparse.ArgumentParser(add_help=False))
    ours = getattr(facade, name)(argparse.ArgumentParser(add_help=False))
    def flags(parser):
        return {action.dest: tuple(sorted(action.option_strings)) for action in parser._actions}
    expected, actual = flags(theirs), flags(ours)
    assert set(expected) - set(actual) <= ONLY_IN_RELEASE
    assert set(actual) - set(expected) <= ONLY_IN_MEGAPLUG
    for dest in set(expected) & set(actual):
        assert actual[dest] == expected[dest], dest
    tokenizer = ours.parse_args([]) if name == "_add_tokenizer_args" else None
    if tokenizer is not None:  # what tools/preprocess_data.py builds its parser from
        shared = set(vars(tokenizer)) - ONLY_IN_MEGAPLUG
        assert {d: vars(tokenizer)[d] for d in shared} == {
            d: v for d, v in vars(theirs.parse_args([])).items() if d in shared}


@pytest.mark.parametrize("helper,text", [
    ("moe_freq_type", "4"), ("moe_freq_type", "([1]*3+[0]*1)*3"), ("moe_freq_type", "[0]+[1]*23"),
    ("no_rope_freq_type", "([0]*3+[1]*1)*2"), ("no_rope_freq_type", "7"),
    ("la_freq_type", "([1]*3+[0]*2)*2"), ("la_freq_type", "2"),
    ("tuple_type", "1,2,3"), ("tuple_type", "(4,5)"),
])
def test_pattern_helpers_give_what_megatrons_give(helper, text):
    import megatron.training.arguments as arguments

    expected = getattr(arguments, helper)(text)
    actual = getattr(facade, helper)(text)
    assert actual == expected and type(actual) is type(expected)


def test_pattern_helpers_refuse_code_where_megatron_evals():
    with pytest.raises(ValueError):
        facade.moe_freq_type("[__import__('os')]")
    with pytest.raises(ValueError):
        facade.moe_freq_type("[1]*10**12")


def multimodal_like_provider(parser):
    """examples/multimodal's shape: a shared dest (--special-tokens -> special_tokens)."""
    group = parser.add_argument_group(title="multimodal arguments")
    group.add_argument("--special-tokens", nargs="*", default=["<image>"])
    group.add_argument("--mm-img-h", type=int, default=336)
    group.add_argument("--freeze-vit", action="store_true")
    group.add_argument("--tokenizer-prompt-format", choices=["mistral", "llama3", "chatml"])
    return parser


def flex_like_provider(parser):
    """pretrain_hybrid_flex's shape: look at parser._actions before adding."""
    if not any(getattr(action, "dest", None) == "flextron" for action in parser._actions):
        parser.add_argument("--flextron", action="store_true")
    parser.add_argument("--budget-list", type=float, nargs="+", default=[1.0])
    return parser


class _Upper(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values.upper())


def custom_action_provider(parser):
    parser.add_argument("--shout", action=_Upper, default="quiet")
    parser.add_argument("--count-me", action="count", default=0)
    parser.set_defaults(seed=4321, my_marker="set")
    return parser


@pytest.mark.parametrize("provider,extra", [
    (multimodal_like_provider, ["--special-tokens", "<a>", "<b>", "--mm-img-h", "224",
                                "--freeze-vit"]),
    (multimodal_like_provider, []),
    (flex_like_provider, ["--flextron", "--budget-list", "0.5", "0.75"]),
    (custom_action_provider, ["--shout", "hi", "--count-me", "--count-me"]),
    (custom_action_provider, []),
])
def test_extra_args_providers_give_megatrons_namespace(provider, extra):
    case = with_argv(*extra)
    compare_namespaces(ref.megatron_args(case, provider), ref.megaplug_args(case, provider),
                       case["argv"])


ENTRY = Path(__file__).resolve().parent / "entry" / "pretrain_tiny.py"


def test_an_entry_script_runs_unmodified_through_the_switch(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "megaplug.megatron", str(ENTRY), *SMALL["argv"],
         "--tiny-knob", "7"],
        capture_output=True, text=True, timeout=300,
        env={**SMALL["env"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "PYTHONPATH": ":".join(sys.path)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads(completed.stdout.strip().splitlines()[-1])
    assert report["parse_and_validate_args"] == "megaplug.megatron._facade"
    assert report["get_args_is_args"] is True
    assert report["tiny_knob"] == 7
    assert report["num_layers"] == 4 and report["hidden_size"] == 128
    assert report["params_dtype"] == "torch.bfloat16"
    assert report["attention_backend"] == "megatron.core.transformer.enums.AttnBackend"


def test_the_switch_reports_a_bad_configuration_and_exits(tmp_path):
    completed = subprocess.run(
        [sys.executable, "-m", "megaplug.megatron", str(ENTRY), *SMALL["argv"],
         "--num-attention-heads", "7"],
        capture_output=True, text=True, timeout=300,
        env={**SMALL["env"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "PYTHONPATH": ":".join(sys.path)})
    assert completed.returncode != 0
    assert "--num-attention-heads" in completed.stderr
