"""The RL (GRPO) size rules at the smallest values that matter: 1, 2 and the divisor itself.

Through ``megaplug.resolve`` with every installed plugin; a rule's problem is found by the
flags it names, not by the plugin or module that holds it.
"""

from __future__ import annotations

import pytest

import megaplug
from megaplug.testing import resolve

RL = ("--perform-rl-step",)
PHASE = ("--grpo-prompts-per-step", "--grpo-group-size", "--grpo-iterations")


def problems(*argv: str) -> list:
    try:
        resolve(*RL, *argv, environ={"WORLD_SIZE": "1"})
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


def naming(found: list, *flags: str) -> list:
    return [p for p in found if set(flags) <= set(p.flags)]


def phase(prompts: int, group: int, iterations: int, global_batch: int) -> tuple[str, ...]:
    return ("--grpo-prompts-per-step", str(prompts), "--grpo-group-size", str(group),
            "--grpo-iterations", str(iterations), "--global-batch-size", str(global_batch))


@pytest.mark.parametrize("prompts, group, iterations, global_batch, rejected", [
    (1, 1, 1, 1, False),
    (1, 1, 1, 2, True),
    (1, 2, 1, 2, False),     # the global batch itself
    (1, 3, 1, 2, True),
    (2, 2, 1, 4, False),
    (1, 1, 2, 2, False),
    (1, 1, 3, 2, True),
])
def test_rollouts_fill_whole_global_batches(prompts, group, iterations, global_batch,
                                            rejected):
    found = problems(*phase(prompts, group, iterations, global_batch))
    assert bool(naming(found, *PHASE, "--global-batch-size")) is rejected
    if not rejected:
        assert found == []


@pytest.mark.parametrize("flag", ["--save-interval", "--exit-interval"])
@pytest.mark.parametrize("interval, rejected", [(1, True), (2, False), (3, True), (4, False)])
def test_saves_and_exits_fall_on_inference_phase_boundaries(flag, interval, rejected):
    # 1 prompt x 2 rollouts x 1 iteration over a global batch of 1: phases of 2 iterations
    extra = ("--save", "/ckpt") if flag == "--save-interval" else ()
    found = problems(*phase(1, 2, 1, 1), flag, str(interval), *extra)
    assert bool(naming(found, flag, *PHASE)) is rejected
    if rejected:
        assert [p.message for p in naming(found, flag)] == [
            f"{flag} {interval} is not a multiple of the 2 training iterations of one GRPO "
            "inference phase (2 rollouts / --global-batch-size 1)"]


@pytest.mark.parametrize("micro, rejected", [(1, False), (2, True)])
def test_sequence_packing_needs_a_micro_batch_of_one(micro, rejected):
    found = problems("--rl-use-sequence-packing", "--micro-batch-size", str(micro))
    assert bool(naming(found, "--rl-use-sequence-packing", "--micro-batch-size")) is rejected
