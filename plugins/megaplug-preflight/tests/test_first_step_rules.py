"""Raises of Megatron's first training iteration that the configuration decides
(first_step.py): refused at resolve, with the release that raises."""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, ENVIRON, MOE, target

import megaplug

TP2 = ["--tensor-model-parallel-size", "2"]
SEQUENCE_PARALLEL_MESSAGE = (
    "MoE with --tensor-model-parallel-size 2 needs --sequence-parallel while training "
    "(ValueError: During training, performance may degrade if MoE and tensor parallelism are "
    "enabled without also enabling sequence parallelism); Megatron seed would raise this at "
    "the first training iteration")


def first_step_problems(argv: list[str], packages: dict | None = None) -> list[tuple]:
    try:
        megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON), target=target(packages))
    except megaplug.ConfigError as exc:
        return [(p.message, tuple(p.flags), p.hint) for p in exc.problems
                if "at the first training iteration" in p.message]
    return []


def test_moe_with_tensor_parallelism_and_no_sequence_parallelism_is_refused():
    assert first_step_problems([*MOE, *TP2]) == [
        (SEQUENCE_PARALLEL_MESSAGE,
         ("--num-experts", "--tensor-model-parallel-size", "--sequence-parallel"),
         "add --sequence-parallel")]


@pytest.mark.parametrize("argv", [
    [*MOE, *TP2, "--sequence-parallel"],          # what Megatron asks for
    [*MOE],                                       # no tensor parallelism
    [*TP2],                                       # a dense model
    [*MOE, *TP2, "--skip-train"],                 # no training iteration
    ["--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2",
     "--skip-train"],                             # one micro-batch, but no schedule runs
    [*MOE, "--moe-apply-probs-on-input", "--skip-train"],
])
def test_the_near_misses_pass(argv):
    assert first_step_problems(argv) == []


@pytest.mark.parametrize("version, release, refused", [
    ("0.13.0", "0.13.0", True), ("0.14.1", "0.14.0", True), ("0.15.0", "0.15.0", True),
    ("0.16.1", "0.16.1", True), ("0.17.0", "0.17.0", False), ("0.19.2", "0.19.2", False)])
def test_the_router_needs_transformer_engine_before_0_17(version, release, refused):
    packages = {"megatron_core": version, "transformer_engine": None}
    found = first_step_problems([*MOE], packages)
    expected = [(f"the MoE router of this release needs Transformer Engine, not installed "
                 f"(NameError: name 'te_general_gemm' is not defined, in its gating); "
                 f"Megatron {release} would raise this at the first "
                 f"training iteration", ("--num-experts",),
                 "install Transformer Engine, or use Megatron 0.17.0 or later for MoE without it")]
    assert found == (expected if refused else [])


def test_the_router_is_not_judged_where_transformer_engine_is_unknown_or_installed():
    assert first_step_problems([*MOE], {"megatron_core": "0.15.0"}) == []  # unknown here
    assert first_step_problems([*MOE], {"megatron_core": "0.15.0",
                                        "transformer_engine": "2.17.1"}) == []
    assert first_step_problems([], {"megatron_core": "0.15.0", "transformer_engine": None}) == []
