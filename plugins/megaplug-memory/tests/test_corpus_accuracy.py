"""The estimator against the measured corpus (tests/data/corpus.json): the issue's bars."""

from __future__ import annotations

import pytest

from corpus import GIB, device_memory, points, resolved, tolerance
from megaplug_memory.estimator import Assumptions, Job, estimate, expandable, usable

#: Out-of-memory points the estimator does not refuse, each with why. Holding the set exactly
#: makes this test fail when a change fixes one (remove it) or loses another.
KNOWN_MISSES = {
    # batch C's stand-in all-gather (repeat(), since made in place) asked for a second copy
    # of the 21 GiB expert parameter buffer after the first step: the measuring script's
    # memory, not Megatron's. Its H100-sized twin mixtral-l9-ep2-s4k-m2-full (batch E,
    # in-place stand-in) trained at 69.2 GiB against 71.1 predicted.
    "mixtral-l16-ep2-s4k-m2-full",
}


def _rank(point: dict):
    """The point's rank as estimated under its own allocator settings (balanced routing is
    what the measuring script's stand-in collectives give the all-to-all dispatcher)."""
    assumptions = Assumptions(expandable_segments=expandable(point.get("alloc_conf")))
    return estimate(resolved(point), rank=point["rank"], assumptions=assumptions)[0]


def _peak(point: dict) -> int:
    return _rank(point).peak


def _needed(point: dict) -> int:
    """What the verdict compares with the device: the MoE bound plus the allocator margin."""
    return _rank(point).needed


def _trained() -> list[dict]:
    return [p for p in points() if p["outcome"] == "ok"]


def test_at_least_90_percent_of_measured_peaks_within_10_percent_or_2_gib():
    trained = _trained()
    within = [p["name"] for p in trained
              if abs(_peak(p) - p["peak_allocated_bytes"]) <= tolerance(p["peak_allocated_bytes"])]
    assert len(trained) >= 30
    assert len(within) / len(trained) >= 0.90, sorted(set(p["name"] for p in trained) - set(within))


def test_unseen_batches_are_as_accurate():
    """Batches C-E were measured after the constants were fitted on batches A and B."""
    from measure_batches import unseen_names

    unseen = [p for p in _trained() if p["name"] in unseen_names()]
    assert len(unseen) >= 13
    for point in unseen:
        assert abs(_peak(point) - point["peak_allocated_bytes"]) <= tolerance(
            point["peak_allocated_bytes"]), point["name"]


def test_out_of_memory_points_are_refused_but_the_known_misses():
    ran_out = [p for p in points() if p["outcome"] == "oom"]
    assert len(ran_out) >= 8
    not_refused = {p["name"] for p in ran_out if _needed(p) <= usable(device_memory(p))}
    assert not_refused == KNOWN_MISSES


def test_no_refusal_of_a_point_that_used_under_90_percent_of_the_device():
    for point in _trained():
        if point["peak_allocated_bytes"] < 0.9 * device_memory(point):
            assert _needed(point) <= usable(device_memory(point)), point["name"]



def test_the_corpus_spans_two_devices():
    """The H100's points judge the same estimator against another device's limit."""
    sizes = {p["device"]: device_memory(p) for p in points()}
    assert sizes == {"NVIDIA H200": int(139.80 * GIB), "NVIDIA H100 80GB HBM3": 85017493504}
    h100 = [p for p in points() if p["device"].startswith("NVIDIA H100")]
    assert {p["outcome"] for p in h100} == {"ok", "oom"}


@pytest.mark.parametrize("point", _trained(), ids=lambda p: p["name"])
def test_weights_gradients_and_optimizer_match_what_stays_allocated(point):
    """What is allocated after an optimizer step is the weights, gradients and optimizer
    states, Megatron's small buffers and, on the last stage, the last micro-batch's logits,
    which the schedule still holds (bf16; fp32 under tensor parallelism, as measured): the
    static parts alone, for every point."""
    values = resolved(point)
    job = Job(values)
    rank = estimate(values, rank=point["rank"])[0]
    static = sum(rank.parts[name] for name in ("weights", "gradients", "optimizer"))
    if rank.stage == job.pp - 1:
        logit_bytes = 4 if job.tp > 1 else job.param_bytes
        static += logit_bytes * job.seq * job.micro_batch * job.vocab // job.tp
    measured = point["allocated_after_step_bytes"]
    assert abs(static - measured) <= max(0.10 * measured, 2 * GIB)


def test_megatron_own_estimate_is_the_worse_one():
    """The side-by-side docs/memory.md prints: Megatron's report_theoretical_memory."""
    ours = megatron = 0
    for point in _trained():
        measured = point["peak_allocated_bytes"]
        ours += abs(_peak(point) - measured) <= tolerance(measured)
        megatron += abs(point["megatron_estimate_bytes"] - measured) <= tolerance(measured)
    assert ours > megatron
