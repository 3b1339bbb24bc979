"""An RL launch through megaplug's facade holds what Megatron's own validate_args sets.

Megatron's training loop reads settings that validate_args derives for an RL run
(``grpo_samples_per_iteration`` times GRPO's collection phases); a namespace without them
fails after allocation, not at launch.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys

import pytest

ENVIRON = {"WORLD_SIZE": "1", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
RL_LAUNCH = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "1",
    "--global-batch-size", "32", "--train-iters", "10", "--lr", "1e-4", "--bf16",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "128",
    "--perform-rl-step", "--grpo-prompts-per-step", "8", "--grpo-group-size", "4",
]


def megatron_namespace(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    import megatron.training.arguments as arguments

    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["train_rl.py", *argv])
    with contextlib.redirect_stdout(io.StringIO()):
        args = arguments.parse_args()
        arguments.validate_args(args, {})
    return args


def megaplug_namespace(argv: list[str]) -> argparse.Namespace:
    from megaplug.megatron import parse_and_validate_args

    return parse_and_validate_args(argv=argv, environ=ENVIRON, register=False)


def release_only_flags() -> set[str]:
    """Flags of the installed Megatron release that megaplug (following a newer revision)
    does not declare: the only settings Megatron may hold that megaplug does not."""
    import megaplug
    from megatron.training.arguments import add_megatron_arguments

    parser = add_megatron_arguments(argparse.ArgumentParser(add_help=False))
    kernel, _rest = megaplug.load()
    return {action.dest for action in parser._actions} - set(kernel.table.by_dest)


def test_an_rl_run_holds_every_setting_megatron_derives(monkeypatch):
    reference = megatron_namespace(RL_LAUNCH, monkeypatch)
    namespace = megaplug_namespace(RL_LAUNCH)
    assert reference.grpo_samples_per_iteration == 32
    assert namespace.grpo_samples_per_iteration == 32
    assert type(namespace.grpo_samples_per_iteration) is int
    assert set(vars(reference)) - set(vars(namespace)) <= release_only_flags()


def test_a_run_without_rl_has_no_rl_sample_count(monkeypatch):
    launch = [token for token in RL_LAUNCH if token != "--perform-rl-step"]
    reference = megatron_namespace(launch, monkeypatch)
    namespace = megaplug_namespace(launch)
    assert not hasattr(reference, "grpo_samples_per_iteration")
    assert not hasattr(namespace, "grpo_samples_per_iteration")
