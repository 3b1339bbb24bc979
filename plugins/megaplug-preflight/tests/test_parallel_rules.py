"""Model-parallel rules whole (message, flags, hint) with their near misses: sequence
parallelism, per-layer context-parallel communication types, symmetric all-reduce versions.
Megatron's checks: ModelParallelConfig.__post_init__ (sequence parallelism) and
TransformerConfig.__post_init__ (cp_comm_type per layer; symmetric_ar_type needs torch >= 2.7
and Transformer Engine >= 2.3)."""

from __future__ import annotations

from typing import Any

import pytest
from preflight_launches import problems

AT_MODEL_BUILD = "; Megatron would raise this when building the model"
CP = "--context-parallel-size"


def whole(argv: list[str], packages: dict[str, Any] | None = None, *,
          others: bool = False) -> list[tuple]:
    """Pre-flight's problems as (message without the common ending, flags, hint); unless
    ``others``, no other plugin may object (the launch passes validate_args)."""
    found = problems(argv, packages=packages)
    if not others:
        assert not [str(p) for p in found if p.plugin != "preflight"]
    found = [p for p in found if p.plugin == "preflight"]
    assert all(p.message.endswith(AT_MODEL_BUILD) for p in found)
    return [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in found]


@pytest.mark.parametrize("argv", [
    [],
    ["--sequence-parallel", "--tensor-model-parallel-size", "2"],
    # validate_args turns sequence parallelism off without tensor parallelism
    ["--sequence-parallel"],
    ["--sequence-parallel", "--tensor-model-parallel-size", "1"],
])
def test_sequence_parallelism_as_validate_args_leaves_it_passes(argv):
    assert whole(argv) == []


def test_sequence_parallelism_without_tensor_parallel_ranks_is_rejected_by_pre_flight_too():
    # validate_args turns sequence parallelism off at size 1 only; a size of 0 is its own
    # error (the parallel plugin's), and pre-flight still reports what the model would raise
    assert whole(["--sequence-parallel", "--tensor-model-parallel-size", "0"], others=True) == [
        ("--sequence-parallel needs tensor parallelism",
         ("--sequence-parallel", "--tensor-model-parallel-size"),
         "drop --sequence-parallel, or raise --tensor-model-parallel-size")]
    assert whole(["--tensor-model-parallel-size", "0"], others=True) == []


def per_layer(count: int) -> list[str]:
    return ["--cp-comm-type", *(["p2p", "a2a"] * count)[:count]]


@pytest.mark.parametrize("argv", [
    [CP, "2", *per_layer(8)],
    [CP, "2", *per_layer(1)],
    [CP, "2", "--cp-comm-type", "a2a"],
    [CP, "1", *per_layer(2)],
    per_layer(3),
    [CP, "2", *per_layer(4), "--num-layers", "4"],
])
def test_context_parallel_communication_types_that_cover_the_layers_pass(argv):
    assert whole(argv) == []


@pytest.mark.parametrize("argv, count, layers", [
    ([CP, "2", *per_layer(2)], 2, 8),
    ([CP, "2", *per_layer(7)], 7, 8),
    ([CP, "2", *per_layer(9)], 9, 8),
    ([CP, "4", *per_layer(8), "--num-layers", "4"], 8, 4),
])
def test_context_parallel_communication_types_must_be_one_or_one_per_layer(argv, count, layers):
    assert whole(argv) == [
        (f"--cp-comm-type lists {count} types, but the model has --num-layers {layers}",
         ("--cp-comm-type", "--num-layers"), "give one type for all layers, or one per layer")]


SYMMETRIC = ["--symmetric-ar-type", "two_shot"]
TORCH_TOO_OLD = ("--symmetric-ar-type needs torch >= 2.7, found {}", ("--symmetric-ar-type",),
                 "upgrade torch")
TE_TOO_OLD = ("--symmetric-ar-type requires transformer_engine >= 2.3.0, found {}",
              ("--symmetric-ar-type",), "upgrade Transformer Engine")


def problem(template: tuple, found: str) -> tuple:
    return (template[0].format(found), *template[1:])


@pytest.mark.parametrize("packages, found", [
    ({"torch": "2.7.0", "transformer_engine": "2.3.0"}, []),
    ({"torch": "2.7.0a0", "transformer_engine": "2.17.1"}, []),
    ({"torch": "2.8.1", "transformer_engine": "2.3.1"}, []),
    # neither stated nor installed: the target's version is unknown, no check
    ({"torch": None}, []),
    ({"torch": "2.6.0", "transformer_engine": "2.3.0"}, [problem(TORCH_TOO_OLD, "2.6.0")]),
    ({"torch": "2.6.9", "transformer_engine": "2.3.0"}, [problem(TORCH_TOO_OLD, "2.6.9")]),
    ({"torch": "2.7.0", "transformer_engine": "2.2.9"}, [problem(TE_TOO_OLD, "2.2.9")]),
    ({"torch": "2.1.0", "transformer_engine": "1.0"},
     [problem(TORCH_TOO_OLD, "2.1.0"), problem(TE_TOO_OLD, "1.0")]),
    ({"torch": None, "transformer_engine": None},
     [("--symmetric-ar-type requires transformer_engine >= 2.3.0, not installed",
       ("--symmetric-ar-type",), "upgrade Transformer Engine")]),
])
def test_symmetric_all_reduce_needs_recent_torch_and_transformer_engine(packages, found):
    assert whole(SYMMETRIC, packages=packages) == found


def test_without_symmetric_all_reduce_the_versions_do_not_matter():
    assert whole([], packages={"torch": "2.1.0", "transformer_engine": "1.0"}) == []
