"""Pre-flight: refuse a launch whose worst rank will not fit in the target GPU's memory."""

from __future__ import annotations

from .estimator import GIB, Job, estimate, usable

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


def worst_peak(values: dict[str, Any]) -> Any:
    """The estimate of the rank with the largest predicted peak."""
    return max(estimate(values), key=lambda rank: rank.peak)


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


def cheapest_fit(values: dict[str, Any], device_memory: int) -> str | None:
    """The cheapest change (or pair) after which the estimator predicts every rank fits, as
    words with its predicted peak; None if none does. Ties go to the earlier change."""
    for _, changed, words in sorted(_candidates(values), key=lambda found: found[0]):
        if not Job(changed).sizable():
            continue
        peak = worst_peak(changed).peak
        if peak <= usable(device_memory):
            return f"{words}: predicted peak {peak / GIB:.1f} GiB"
    return None


def fits_device(config: Draft) -> None:
    """Refuse when the worst rank's predicted peak exceeds what the target GPU can allocate.

    Only when the target's memory is known (``--assume-device-memory``, or the GPU here).
    """
    device_memory = config.env.memory()
    if device_memory is None:
        return
    values = config.to_dict()
    if not Job(values).sizable():
        return  # a size of zero or less: the plugin owning it reports that
    worst = worst_peak(values)
    limit = usable(device_memory)
    if worst.peak <= limit:
        return
    biggest = worst.biggest_part()
    hint = cheapest_fit(values, device_memory) or (
        "no single change tried (distributed optimizer, recompute, a smaller micro-batch, "
        "more tensor or pipeline parallelism) fits: use more GPUs or a smaller model")
    config.error(
        f"rank {worst.rank} (pipeline stage {worst.stage}) is predicted to need "
        f"{worst.peak / GIB:.1f} GiB of GPU memory at its peak, more than the "
        f"{limit / GIB:.1f} GiB a {device_memory / GIB:.1f} GiB GPU can allocate; its biggest "
        f"part is {biggest} ({worst.parts[biggest] / GIB:.1f} GiB); `megaplug memory` shows "
        "every part",
        flags=("--micro-batch-size", "--seq-length", "--tensor-model-parallel-size",
               "--pipeline-model-parallel-size", "--recompute-granularity"),
        hint=hint)


CHECKS = (fits_device,)
