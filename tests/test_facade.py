"""megaplug.megatron behaves like Megatron's parse_args / validate_args."""

from __future__ import annotations

import argparse

import pytest

import megaplug.megatron

import megaplug
from megaplug.megatron import (
    add_megatron_arguments,
    parse_and_validate_args,
    parse_args,
    resolution_warnings,
    validate_args,
)

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4", "-p", "no:lora"]
ENV = {"RANK": "0", "WORLD_SIZE": "4"}
TARGET = dict(packages={"transformer_engine": "2.17.1"}, device_capability=(9, 0))


def target():
    return megaplug.TargetEnvironment(**TARGET)


def test_parse_then_validate_in_place():
    args = parse_args(argv=BASE, environ=ENV)
    assert args.world_size == 4 and args.rank == 0
    assert (args.global_batch_size is None
            and args._is_global_batch_size_explicitly_specified is False)
    same = validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"}, target=target(), environ=ENV)
    assert same is args
    assert args.data_parallel_size == 4 and args.global_batch_size == 8
    assert args.tokenizer_type == "GPT2BPETokenizer"
    assert args.ffn_hidden_size == 256 and args.kv_channels == 16
    assert not hasattr(args, "batch_size")  # retired settings are deleted, as in Megatron


def test_torch_dtypes_by_default():
    torch = pytest.importorskip("torch")
    args = parse_and_validate_args(argv=[*BASE, "--bf16"], environ=ENV, target=target())
    assert args.params_dtype is torch.bfloat16


def test_all_problems_raise_one_config_error():
    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(argv=[*BASE, "--hidden-size", "66", "--num-experts", "6",
                                      "--expert-model-parallel-size", "4", "--lr-typo", "1"],
                                environ=ENV, target=target())
    plugins = {p.plugin for p in info.value.problems}
    assert {"model", "moe"} <= plugins
    assert any("--lr-typo" in p.message for p in info.value.problems)


def test_extra_args_provider_receives_a_parser():
    def provider(parser):
        group = parser.add_argument_group(title="mine")
        group.add_argument("--my-knob", type=int, default=3, help="A knob.")
        return parser

    args = parse_and_validate_args(provider, argv=[*BASE, "--my-knob", "5"], environ=ENV,
                                   target=target())
    assert args.my_knob == 5


def test_ignore_unknown_args():
    args = parse_args(ignore_unknown_args=True, argv=[*BASE, "--not-a-flag", "1"], environ=ENV)
    assert args.num_layers == 2


def test_args_defaults_fill_only_unset_values():
    args = parse_and_validate_args(argv=[*BASE, "--tokenizer-type", "NullTokenizer",
                                         "--vocab-size", "100"],
                                   args_defaults={"tokenizer_type": "GPT2BPETokenizer"},
                                   environ=ENV, target=target())
    assert args.tokenizer_type == "NullTokenizer"
    assert any("tokenizer_type" in str(w) for w in resolution_warnings(args))


def test_add_megatron_arguments_to_a_plain_parser():
    parser = add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    args = parser.parse_args(["--num-layers", "3", "--no-masked-softmax-fusion"])
    assert args.num_layers == 3 and args.masked_softmax_fusion is False


def test_use_checkpoint_args_without_a_checkpoint_warns_like_megatron(tmp_path):
    args = parse_and_validate_args(argv=[*BASE, "--use-checkpoint-args", "--load", str(tmp_path)],
                                   environ=ENV, target=target())
    assert args.num_layers == 2
    assert any("no checkpoint found" in str(w) for w in resolution_warnings(args))
    with pytest.raises(megaplug.ConfigError, match="no checkpoint found"):
        parse_and_validate_args(argv=[*BASE, "--use-checkpoint-args", "--load", str(tmp_path),
                                      "--exit-on-missing-checkpoint"], environ=ENV, target=target())


def test_use_checkpoint_args_needs_load_said_once():
    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(argv=[*BASE, "--use-checkpoint-args"], environ=ENV, target=target())
    said = [str(p) for p in info.value.problems if "checkpoint" in p.message]
    assert said == ["[checkpointing] --use-checkpoint-args needs --load or --pretrained-checkpoint "
                    "(hint: add --load DIR with the checkpoint whose arguments to use)"]


def test_use_checkpoint_args_from_caller_defaults_needs_load_too():
    with pytest.raises(megaplug.ConfigError,
                       match=r"use_checkpoint_args \(from the caller's defaults\) "
                             r"needs a checkpoint"):
        parse_and_validate_args(argv=BASE, environ=ENV, target=target(),
                                args_defaults={"use_checkpoint_args": True})


def test_namespace_holds_only_values_and_pickles():
    import pickle

    args = parse_and_validate_args(argv=BASE, environ=ENV, target=target(), torch_types=False)
    assert not [key for key in vars(args) if key.startswith("_megaplug")]
    restored = pickle.loads(pickle.dumps(args))
    assert vars(restored) == vars(args)
    assert megaplug.megatron.provenance(args)["ffn_hidden_size"].source == "derived"
    assert megaplug.megatron.provenance(restored) == {}  # provenance stays with the original


def test_exit_signal_is_a_signal_like_megatrons():
    import signal

    args = parse_and_validate_args(argv=[*BASE, "--exit-signal", "SIGUSR1"], environ=ENV,
                                   target=target(), torch_types=False)
    assert args.exit_signal is signal.SIGUSR1


def test_config_error_is_an_assertion_error_carrying_every_problem():
    with pytest.raises(AssertionError) as info:
        parse_and_validate_args(argv=[*BASE, "--hidden-size", "66", "--no-such-flag"],
                                environ=ENV, target=target())
    assert isinstance(info.value, megaplug.ConfigError)
    assert len(info.value.problems) >= 2
    assert info.value.partial["hidden_size"] == 66


def test_a_provider_gets_a_real_argparse_parser():
    class Upper(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, self.dest, values.upper())

    seen = {}

    def provider(parser):
        seen["has_num_layers"] = any(a.dest == "num_layers" for a in parser._actions)
        parser.add_argument("--special-tokens", nargs="*", default=["<image>"])  # shared dest
        parser.add_argument("--shout", action=Upper, default="quiet")
        parser.set_defaults(seed=4321, marker="set")
        return parser

    args = parse_and_validate_args(provider, argv=[*BASE, "--shout", "hi"], environ=ENV,
                                   target=target())
    assert seen["has_num_layers"] is True
    assert args.special_tokens is None  # argparse: the first declaration's default stands
    assert (args.shout, args.seed, args.marker) == ("HI", 4321, "set")
    assert megaplug.megatron.provenance(args)["shout"].source == "command-line"
    given = parse_and_validate_args(provider, argv=[*BASE, "--special-tokens", "<a>", "<b>"],
                                    environ=ENV, target=target())
    assert given.special_tokens == ["<a>", "<b>"]


def test_a_bad_provider_value_is_a_problem_not_an_exit():
    def provider(parser):
        parser.add_argument("--img-size", type=int, default=3)
        return parser

    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(provider, argv=[*BASE, "--img-size", "big"], environ=ENV,
                                target=target())
    assert any("--img-size" in p.message for p in info.value.problems)


def test_group_adders_add_just_their_group():
    from megaplug.megatron import GROUP_ADDERS, _add_tokenizer_args

    parser = _add_tokenizer_args(argparse.ArgumentParser())
    dests = {action.dest for action in parser._actions} - {"help"}
    assert {"tokenizer_type", "vocab_size", "special_tokens"} <= dests
    assert "num_layers" not in dests
    assert "_add_network_size_args" in GROUP_ADDERS and len(GROUP_ADDERS) >= 30


@pytest.mark.parametrize("helper,text,expected", [
    ("moe_freq_type", "([1]*3+[0]*1)*2", [1, 1, 1, 0, 1, 1, 1, 0]),
    ("moe_freq_type", "4", 4),
    ("no_rope_freq_type", None, None),
    ("tuple_type", "(1,2,3)", (1, 2, 3)),
    ("compress_ratios_type", "[4]*2", [4, 4]),
])
def test_pattern_helpers(helper, text, expected):
    assert getattr(megaplug.megatron, helper)(text) == expected


def test_pattern_helpers_never_run_code():
    with pytest.raises(ValueError):
        megaplug.megatron.moe_freq_type("[__import__('os').system('true')]")


def test_the_switch_needs_a_script(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "megaplug.megatron", str(tmp_path / "no.py")],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "no such script" in done.stderr


def test_preflight_runs_only_when_asked():
    # 6 heads cannot be split over 4 tensor-parallel ranks: Megatron's validate_args accepts
    # it, its model configuration refuses it later.
    argv = [*BASE, "--hidden-size", "96", "--num-attention-heads", "6",
            "--tensor-model-parallel-size", "4"]
    env = {**ENV, "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    args = parse_and_validate_args(argv=argv, environ=env, target=target(), torch_types=False)
    assert args.num_attention_heads == 6
    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(argv=argv, environ=env, target=target(), torch_types=False,
                                preflight=True)
    assert any(p.plugin == "preflight" for p in info.value.problems)
    with pytest.raises(megaplug.ConfigError):
        parse_and_validate_args(argv=argv, environ={**env, "MEGAPLUG_PREFLIGHT": "1"},
                                target=target(), torch_types=False)


# -- what a caller hands the facade, checked as megaplug.resolve checks it ----------------------

_VALID = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
          "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1"]


def _plain(**kwargs):
    return parse_and_validate_args(torch_types=False, register=False, environ={}, **kwargs)


@pytest.mark.parametrize("argv", ["--num-layers 2", b"--num-layers 2"])
def test_argv_as_one_string_is_refused_as_resolve_refuses_it(argv):
    for call in (lambda: megaplug.megatron.parse_args(argv=argv),
                 lambda: _plain(argv=argv), lambda: megaplug.resolve(argv)):
        with pytest.raises(TypeError, match="argv must be a list of str, not one"):
            call()


def test_a_path_in_argv_is_its_text(tmp_path):
    from pathlib import Path

    args = _plain(argv=[*_VALID, "--data-path", Path("/data/corpus"), "--split", "1,0,0"])
    assert args.data_path == ["/data/corpus"]
    with pytest.raises(TypeError, match=r"argv\[1\] is 2, a int"):
        megaplug.megatron.parse_args(argv=["--num-layers", 2])


@pytest.mark.parametrize("key", [1, None, ("num_layers",)])
def test_defaults_keyed_by_what_is_not_text_are_a_problem(key):
    with pytest.raises(megaplug.ConfigError) as error:
        _plain(argv=_VALID, args_defaults={key: 2})
    assert [p.message for p in error.value.problems] == [
        f"the caller's defaults name a setting by {key!r} ({type(key).__name__})"]


@pytest.mark.parametrize("setting,value,message", [
    ("num_layers", "4", "num_layers set on the namespace before validate_args is the text "
                        "'4', not an int"),
    ("hidden_size", "x", "hidden_size set on the namespace before validate_args is the text "
                         "'x', not an int"),
    ("lr", "1e-4", "lr set on the namespace before validate_args is the text '1e-4', not a "
                   "float"),
])
def test_a_bad_value_set_between_parse_and_validate_is_one_typed_problem(setting, value,
                                                                       message):
    args = megaplug.megatron.parse_args(argv=_VALID, environ={})
    setattr(args, setting, value)
    with pytest.raises(megaplug.ConfigError) as error:
        validate_args(args, torch_types=False)
    assert [p.message for p in error.value.problems] == [message]


def test_a_good_value_set_between_parse_and_validate_is_taken():
    args = megaplug.megatron.parse_args(argv=_VALID, environ={})
    args.num_layers, args.lr = 4, 3e-4
    validate_args(args, torch_types=False)
    assert (args.num_layers, args.lr) == (4, 3e-4)
    assert megaplug.megatron.provenance(args)["num_layers"].detail == \
        "set on the namespace before validate_args"


def test_a_bad_value_of_the_entry_scripts_flag_is_reported_once():
    def provider(parser):
        parser.add_argument("--my-flag", type=int, default=1)
        parser.add_argument("--my-list", type=int, nargs="+", default=[1])
        return parser

    for bad in (["--my-flag", "x"], ["--my-list", "1", "x"]):
        with pytest.raises(megaplug.ConfigError) as error:
            _plain(extra_args_provider=provider, argv=[*_VALID, *bad])
        assert [p.plugin for p in error.value.problems] == ["extra_args_provider"], \
            error.value.problems


def test_a_ten_megabyte_value_is_refused_quickly_and_shown_short():
    import time

    started = time.perf_counter()
    with pytest.raises(megaplug.ConfigError) as error:
        _plain(argv=[*_VALID, "--tokenizer-type", "a" * 10_000_000])
    assert time.perf_counter() - started < 5
    assert len(str(error.value)) < 2000
    assert "more characters" in str(error.value)


def test_given_values_cannot_be_changed_from_outside():
    resolved = megaplug.resolve([*_VALID, "--data-path", "a", "b", "--split", "1,0,0"],
                                environ={})
    given = resolved.given_values()
    given["data_path"].append("z")
    given["num_layers"] = 99
    assert resolved.given_values()["data_path"] == ["a", "b"]
    assert resolved.given_values()["num_layers"] == 2
