"""Rules whose other inputs stay declared when the parallel plugin is blocked: each must then
assume Megatron's defaults for the parallel sizes (1), not some other value."""

from __future__ import annotations

import pytest
from preflight_launches import ENVIRON, target

import megaplug

NO_PARALLEL = ["-p", "no:parallel", "--num-layers", "8", "--hidden-size", "128",
               "--num-attention-heads", "8", "--seq-length", "128",
               "--max-position-embeddings", "128", "--micro-batch-size", "2",
               "--train-iters", "10", "--lr", "1e-4", "--bf16"]
INVARIANT = ["--batch-invariant-mode", "--attention-backend", "flash",
             "--flash-attention-version", "3", "--attention-dropout", "0"]


def preflight_problems(argv: list[str]) -> list[str]:
    try:
        megaplug.resolve([*NO_PARALLEL, *argv], environ=dict(ENVIRON), target=target())
    except megaplug.ConfigError as error:
        assert not [str(p) for p in error.problems if p.plugin != "preflight"]
        return [p.message for p in error.problems]
    return []


@pytest.mark.parametrize("argv", [
    INVARIANT,                                                 # no context parallelism
    ["--enable-mhc-connections"],                              # no pipeline stages
])
def test_the_parallel_sizes_read_as_one_without_the_parallel_plugin(argv):
    assert preflight_problems(argv) == []


def test_the_rules_still_judge_what_they_read_without_the_parallel_plugin():
    # the near miss: the same rules fire on what is still declared
    assert preflight_problems([*INVARIANT[:-2], "--attention-dropout", "0.1"]) == [
        "--batch-invariant-mode does not support attention dropout; Megatron would raise this "
        "when building the model"]
    assert preflight_problems(["--enable-mhc-connections", "--fp32-residual-connection"]) == [
        "--enable-mhc-connections does not work with --fp32-residual-connection; Megatron would "
        "raise this when building the model"]
