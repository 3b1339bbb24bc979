"""Pre-flight's size and divisibility rules at the smallest values that matter: 1, 2 and
the divisor itself (not only a comfortable 4)."""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, ENVIRON, problems, target

import megaplug


def preflight(argv: list[str]) -> tuple[list[tuple], list[tuple]]:
    """(pre-flight's problems, pre-flight's warnings) as (message, flags)."""
    found = problems(argv)
    others = [str(p) for p in found if p.plugin != "preflight"]
    assert not others, others
    if found:
        return [(p.message, tuple(p.flags)) for p in found], []
    resolved = megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON), target=target())
    return [], [(w.message, tuple(w.flags)) for w in resolved.warnings
                if w.plugin == "preflight"]


def with_heads(heads: int) -> list[str]:
    return ["--num-attention-heads", str(heads), "--kv-channels", "16"]


@pytest.mark.parametrize("heads, tp, rejected", [
    (1, 1, False), (1, 2, True), (2, 2, False), (3, 2, True), (4, 4, False), (6, 4, True),
    (8, 8, False),
])
def test_heads_split_evenly_over_tensor_parallel_ranks(heads, tp, rejected):
    found, _ = preflight([*with_heads(heads), "--tensor-model-parallel-size", str(tp)])
    assert [flags for _, flags in found] == (
        [("--num-attention-heads", "--tensor-model-parallel-size")] if rejected else [])


@pytest.mark.parametrize("groups, tp, rejected", [
    (1, 2, False), (2, 2, False), (3, 2, True), (4, 2, False), (2, 4, False), (6, 4, True),
    (12, 4, False),
])
def test_query_groups_are_a_multiple_or_a_divisor_of_tensor_parallelism(groups, tp, rejected):
    found, _ = preflight([*with_heads(12), "--group-query-attention", "--num-query-groups",
                          str(groups), "--tensor-model-parallel-size", str(tp)])
    assert [flags for _, flags in found] == (
        [("--num-query-groups", "--tensor-model-parallel-size")] if rejected else [])


@pytest.mark.parametrize("groups, warned", [(1, False), (2, False), (3, True), (8, False)])
def test_query_groups_hold_whole_heads(groups, warned):
    _, warnings = preflight([*with_heads(8), "--group-query-attention", "--num-query-groups",
                             str(groups)])
    assert [flags for _, flags in warnings] == (
        [("--num-attention-heads", "--num-query-groups")] if warned else [])


@pytest.mark.parametrize("width, tp, warned", [
    (6, 1, False), (6, 2, False), (5, 2, True), (6, 4, True), (8, 8, False),
])
def test_the_mlp_width_splits_over_tensor_parallel_ranks(width, tp, warned):
    _, warnings = preflight(["--ffn-hidden-size", str(width),
                             "--tensor-model-parallel-size", str(tp)])
    assert [flags for _, flags in warnings] == (
        [("--ffn-hidden-size", "--tensor-model-parallel-size")] if warned else [])
