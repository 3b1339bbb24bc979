"""The pure GTP layout arithmetic."""

from __future__ import annotations

import pytest

from megaplug_gtp.layout import LayoutError, resolve_tensor_parallel_weight_shards


@pytest.mark.parametrize("tp, shards, expected", [
    (1, None, (1, 1)),
    (4, None, (4, 1)),
    (2, 2, (2, 1)),
    (2, 8, (8, 4)),
    (4, 8, (8, 2)),
])
def test_weight_shards(tp, shards, expected):
    assert resolve_tensor_parallel_weight_shards(tp, shards) == expected


def test_weight_shards_default_keeps_a_restored_remat_size():
    assert resolve_tensor_parallel_weight_shards(2, None, 3) == (6, 3)


@pytest.mark.parametrize("tp, shards", [(4, 2), (4, 6), (2, 0), (2, -2), (0, 2)])
def test_weight_shards_must_be_positive_multiples(tp, shards):
    with pytest.raises(LayoutError) as info:
        resolve_tensor_parallel_weight_shards(tp, shards)
    assert info.value.hint
