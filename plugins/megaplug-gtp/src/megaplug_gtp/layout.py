"""The GTP layout arithmetic, free of configuration plumbing.

GTP shards a weight over ``tensor_parallel_size * remat`` ranks: the usual tensor-parallel
split, times a *rematerialization* group whose ranks each hold a slice of the weight and
all-gather it just before use (and reduce-scatter its gradient). The remat ranks work on
different samples, so they add to the ranks one model replica spans.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
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
