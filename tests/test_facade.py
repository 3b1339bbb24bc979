"""megaplug.megatron behaves like Megatron's parse_args / validate_args."""

from __future__ import annotations

import argparse

import pytest

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
