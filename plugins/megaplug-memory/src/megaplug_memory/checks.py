"""Pre-flight: refuse a launch whose worst rank will not fit in the target GPU's memory."""

from __future__ import annotations

from .estimator import GIB, Assumptions, Job, estimate, usable, verdict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

    from megaplug import Draft

# The changes the hint may propose (CHANGES, cheapest in training speed first): each
# returns the values changed and the words of the hint, or None where it does not apply.

def _distributed_optimizer(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    if values.get("use_distributed_optimizer") or int(values.get("data_parallel_size") or 1) < 2:
        return None
    return {**values, "use_distributed_optimizer": True}, "add --use-distributed-optimizer"


def _selective_recompute(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    if values.get("recompute_granularity"):
        return None
    return ({**values, "recompute_granularity": "selective", "recompute_modules": None},
            "add --recompute-granularity selective")


def _smaller_micro_batch(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    size = int(values.get("micro_batch_size") or 1)
    if size < 2:
        return None
    smaller = size // 2
    return ({**values, "micro_batch_size": smaller},
            f"use --micro-batch-size {smaller} (the same global batch in more micro-batches)")


def _more_tensor_parallel(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    return _regroup(values, "tensor_model_parallel_size", "--tensor-model-parallel-size",
                    lambda size: int(values.get("num_attention_heads") or 1) % size == 0
                    and size <= 8)


def _more_pipeline_parallel(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    return _regroup(values, "pipeline_model_parallel_size", "--pipeline-model-parallel-size",
                    lambda size: int(values.get("num_layers") or 1) % size == 0)


def _regroup(values: dict[str, Any], name: str, flag: str,
             allowed: Callable[[int], bool]) -> tuple[dict[str, Any], str] | None:
    """Double one model-parallel size, taking the ranks from data parallelism."""
    data_parallel = int(values.get("data_parallel_size") or 1)
    size = int(values.get(name) or 1) * 2
    if data_parallel % 2 or not allowed(size):
        return None
    return ({**values, name: size, "data_parallel_size": data_parallel // 2},
            f"use {flag} {size} (data parallelism {data_parallel // 2})")


def _full_recompute(values: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    if values.get("recompute_granularity") == "full":
        return None
    return ({**values, "recompute_granularity": "full", "recompute_method": "uniform",
             "recompute_num_layers": 1},
            "add --recompute-granularity full --recompute-method uniform "
            "--recompute-num-layers 1")


#: Each change with its rough cost in training speed (0: none): the hint proposes the
#: cheapest change, or pair of changes, that fits -- a selective recompute with a smaller
#: micro-batch before a full recompute.
CHANGES = ((_distributed_optimizer, 0), (_selective_recompute, 1), (_smaller_micro_batch, 2),
           (_more_tensor_parallel, 3), (_more_pipeline_parallel, 3), (_full_recompute, 5))


def worst_peak(values: dict[str, Any], assumptions: Assumptions | None = None) -> Any:
    """The estimate of the rank that needs the most (its bound plus the allocator's margin)."""
    return max(estimate(values, assumptions=assumptions), key=lambda rank: rank.needed)


def _candidates(values: dict[str, Any]) -> list[tuple[int, dict[str, Any], str]]:
    """Every change of :data:`CHANGES` and every pair of them: (cost, values, words)."""
    found = []
    for index, (first, first_cost) in enumerate(CHANGES):
        once = first(values)
        if once is None:
            continue
        found.append((first_cost, once[0], once[1]))
        for second, second_cost in CHANGES[index + 1:]:
            twice = second(once[0])
            if twice is not None:
                found.append((first_cost + second_cost, twice[0], f"{once[1]} and {twice[1]}"))
    return found


def cheapest_fit(values: dict[str, Any], device_memory: int,
                 assumptions: Assumptions | None = None) -> str | None:
    """The cheapest change (or pair) after which the estimator predicts every rank fits, as
    words with what it then needs; None if none does. Ties go to the earlier change."""
    for _, changed, words in sorted(_candidates(values), key=lambda found: found[0]):
        if not Job(changed).sizable():
            continue
        needed = worst_peak(changed, assumptions).needed
        if needed <= usable(device_memory):
            return f"{words}: predicted to need {needed / GIB:.1f} GiB"
    return None


def assumptions_of(config: Draft) -> Assumptions | None:
    """The target environment's assumptions (``PYTORCH_CUDA_ALLOC_CONF``,
    ``MEGAPLUG_ASSUME_MOE_IMBALANCE``); None, with a problem, when the stated imbalance
    is not a number of 1 or more."""
    try:
        return Assumptions.from_environment(config.env.getenv)
    except ValueError as exc:
        config.error(f"MEGAPLUG_ASSUME_MOE_IMBALANCE: {exc}", flags=(),
                     hint="set it to 1 (balanced routing) or more, or unset it (default 2)")
        return None


def fits_device(config: Draft) -> None:
    """Refuse when the rank that needs the most -- its peak at the bound of MoE routing,
    plus the allocator's margin -- exceeds what the target GPU can allocate.

    Only when the target's memory is known (``--assume-device-memory``, or the GPU here),
    and never from a figure that leaves something out (FSDP, offloading: no verdict); a
    tokenizer-defined vocabulary leaves a lower bound, refused only when it is already over.
    """
    device_memory = config.env.memory()
    if device_memory is None:
        return
    values = config.to_dict()
    job = Job(values)
    if not job.sizable():
        return  # a size of zero or less: the plugin owning it reports that
    if _refused_as_oversized(config, job):
        return
    assumptions = assumptions_of(config)
    if assumptions is None:
        return
    job = Job(values, assumptions)
    worst = worst_peak(values, assumptions)
    if verdict(job, worst, device_memory) is not False:
        return
    limit = usable(device_memory)
    biggest = worst.biggest_part()
    hint = cheapest_fit(values, device_memory, assumptions) or (
        "no single change tried (distributed optimizer, recompute, a smaller micro-batch, "
        "more tensor or pipeline parallelism) fits: use more GPUs or a smaller model")
    config.error(
        f"rank {worst.rank} (pipeline stage {worst.stage}) is predicted to need "
        f"{worst.needed / GIB:.1f} GiB of GPU memory ({_what_is_needed(job, worst)}), more "
        f"than the {limit / GIB:.1f} GiB a {device_memory / GIB:.1f} GiB GPU can allocate; "
        f"its biggest part is {biggest} ({worst.bound_parts[biggest] / GIB:.1f} GiB); "
        "`megaplug memory` shows every part",
        flags=("--micro-batch-size", "--seq-length", "--tensor-model-parallel-size",
               "--pipeline-model-parallel-size", "--recompute-granularity"),
        hint=hint)


def _refused_as_oversized(config: Draft, job: Job) -> bool:
    """Refuse sizes no GPU holds (past 2**40), which the estimate does not take."""
    oversized = job.too_large()
    if oversized:
        config.error(f"no GPU holds this model: {', '.join(oversized)} (the memory estimate "
                     f"takes sizes up to 2**40)",
                     flags=tuple(name.partition("=")[0] for name in oversized),
                     hint="check the sizes given")
    return bool(oversized)


def _what_is_needed(job: Job, rank: Any) -> str:
    """The words for what a refusal adds up: the peak, the MoE bound, the margin."""
    words = f"peak {rank.peak / GIB:.1f} GiB"
    if rank.bound != rank.peak:
        words += (f", {rank.bound / GIB:.1f} GiB with experts receiving "
                  f"{job.moe_bound_factor():g}x their balanced tokens")
    words += f", plus {rank.margin / GIB:.1f} GiB allocator margin"
    if not job.fits_claimable:
        words += "; a lower bound: " + "; ".join(u.words for u in job.unknowns)
    return words


CHECKS = (fits_device,)
