"""The GTP layout arithmetic, free of configuration plumbing.

GTP shards a weight over ``tensor_parallel_size * remat`` ranks: the usual tensor-parallel
split, times a *rematerialization* group whose ranks each hold a slice of the weight and
all-gather it just before use (and reduce-scatter its gradient). The remat ranks work on
different samples, so they add to the ranks one model replica spans. Optionally the remat
group also splits the sequence; its sequence-shard factor then joins context parallelism.
"""

from __future__ import annotations

from typing import Optional


class LayoutError(ValueError):
    """A shard count that does not fit the parallel layout; ``hint`` says what would."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _multiples(base: int, count: int = 3) -> str:
    return ", ".join(str(base * k) for k in range(1, count + 1)) + ", ..."


def resolve_tensor_parallel_weight_shards(
    tensor_parallel_size: int, num_weight_shards: Optional[int], remat_size: int = 1
) -> tuple[int, int]:
    """``(num_weight_shards, remat_size)`` for a tensor-parallel group.

    Without an explicit shard count the weight is split ``tensor_parallel_size *
    remat_size`` ways (``remat_size`` 1 unless restored from a checkpoint). An explicit
    count must be a positive multiple of the tensor-parallel size. Raises ``LayoutError``.
    """
    if num_weight_shards is None:
        return tensor_parallel_size * remat_size, remat_size
    if num_weight_shards < 1:
        raise LayoutError(f"must be at least 1, got {num_weight_shards}",
                          f"use a multiple of the tensor-parallel size "
                          f"{tensor_parallel_size}: {_multiples(tensor_parallel_size)}")
    if tensor_parallel_size < 1:
        raise LayoutError(f"cannot split over a tensor-parallel size of {tensor_parallel_size}",
                          "use a tensor-parallel size of at least 1")
    if num_weight_shards % tensor_parallel_size:
        raise LayoutError(
            f"{num_weight_shards} is not a multiple of the tensor-parallel size "
            f"{tensor_parallel_size}",
            f"use one of {_multiples(tensor_parallel_size)}, or leave it unset for no GTP")
    return num_weight_shards, num_weight_shards // tensor_parallel_size


def resolve_tensor_parallel_sequence_shards(
    tensor_parallel_size: int, num_sequence_shards: Optional[int], remat_size: int,
    sequence_parallel: bool,
) -> tuple[int, int]:
    """``(num_sequence_shards, remat_sequence_shards)``.

    By default the sequence is split only by sequence parallelism over the tensor-parallel
    ranks (factor 1 on the remat group). A larger count must be the tensor-parallel size
    times a divisor of ``remat_size`` and needs sequence parallelism. Raises ``LayoutError``.
    """
    if num_sequence_shards is None:
        return tensor_parallel_size, 1
    if num_sequence_shards < 1 or num_sequence_shards % tensor_parallel_size:
        raise LayoutError(
            f"{num_sequence_shards} is not a positive multiple of the tensor-parallel size "
            f"{tensor_parallel_size}", f"use one of {_multiples(tensor_parallel_size)}")
    remat_shards = num_sequence_shards // tensor_parallel_size
    if remat_size % remat_shards:
        raise LayoutError(
            f"the remat factor {remat_shards} does not divide the GTP remat size {remat_size}",
            "use the tensor-parallel size times a divisor of the remat size")
    if remat_shards > 1 and not sequence_parallel:
        raise LayoutError("sharding the sequence over GTP ranks needs sequence parallelism",
                          "add --sequence-parallel")
    return num_sequence_shards, remat_shards
