"""The MoE size rules at the smallest values that matter: 1, 2 and the divisor itself.

Through ``megaplug.resolve`` with every installed plugin; a rule's problem is found by the
flags it names, not by the plugin or module that holds it.
"""

from __future__ import annotations

import pytest

import megaplug
from megaplug.testing import resolve

EP = "--expert-model-parallel-size"
EXPERTS = "--num-experts"
LATENT = "--moe-latent-size"


def problems(*argv: str, world: int) -> list:
    try:
        resolve(*argv, environ={"WORLD_SIZE": str(world), "RANK": "0"})
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


def naming(found: list, *flags: str) -> list:
    return [p for p in found if set(flags) <= set(p.flags)]


@pytest.mark.parametrize("ep, experts, rejected", [
    (1, 1, False),
    (1, 3, False),
    (2, 1, True),
    (2, 2, False),     # the divisor itself
    (2, 3, True),
    (2, 4, False),
    (3, 3, False),
    (3, 4, True),
    (4, 6, True),
])
def test_experts_divide_over_expert_parallel_ranks(ep, experts, rejected):
    found = problems(EP, str(ep), EXPERTS, str(experts), world=ep)
    assert bool(naming(found, EXPERTS, EP)) is rejected
    if not rejected:
        assert found == []
    else:
        assert [p.message for p in naming(found, EXPERTS, EP)] == [
            f"--num-experts {experts} is not a multiple of --expert-model-parallel-size {ep}"]


@pytest.mark.parametrize("ep, rejected", [(1, False), (2, True), (3, True)])
def test_expert_parallelism_needs_experts(ep, rejected):
    found = problems(EP, str(ep), world=ep)
    assert bool(naming(found, EP, EXPERTS)) is rejected
    if not rejected:
        assert found == []


@pytest.mark.parametrize("experts", ["0", None])
def test_a_dense_model_with_expert_parallelism_two_is_refused(experts):
    argv = (EP, "2") + ((EXPERTS, experts) if experts is not None else ())
    found = naming(problems(*argv, world=2), EP, EXPERTS)
    assert [p.message for p in found] == [
        "--expert-model-parallel-size 2 needs an MoE model, but --num-experts is not set (or 0)"]


@pytest.mark.parametrize("size, rejected", [("-1", True), ("0", True), ("1", False),
                                            ("2", False)])
def test_the_latent_size_is_positive(size, rejected):
    found = problems(EXPERTS, "2", LATENT, size, world=1)
    assert bool(naming(found, LATENT)) is rejected
    if rejected:
        assert [p.message for p in naming(found, LATENT)] == [
            f"--moe-latent-size must be greater than 0, got {size}"]
    else:
        assert found == []


def test_expert_tensor_parallelism_follows_tensor_parallelism_at_one_and_two():
    for tp in (1, 2):
        resolved = resolve("--tensor-model-parallel-size", str(tp), EXPERTS, "2",
                           "--disable-bias-linear", environ={"WORLD_SIZE": str(tp)})
        assert resolved.expert_tensor_parallel_size == tp
