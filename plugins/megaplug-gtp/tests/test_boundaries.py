"""The GTP weight-shard rules at the smallest values that matter: 1, 2 and the divisor itself.

Through ``megaplug.resolve`` with every installed plugin; a rule's problem is found by the
flags it names, not by the plugin or module that holds it.
"""

from __future__ import annotations

import pytest

import megaplug
from megaplug.testing import resolve

TP = "--tensor-model-parallel-size"
SHARDS = "--tensor-parallel-num-weight-shards"


def outcome(*argv: str, world: int):
    try:
        return resolve(*argv, environ={"WORLD_SIZE": str(world)}), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


@pytest.mark.parametrize("tp, shards, world, rejected, remat", [
    (1, 1, 1, False, 1),
    (1, 2, 2, False, 2),
    (2, 2, 2, False, 1),     # the tensor-parallel size itself: no rematerialization
    (2, 4, 4, False, 2),
    (2, 3, 2, True, None),
    (2, 1, 2, True, None),
    (1, 0, 1, True, None),
])
def test_weight_shards_are_a_positive_multiple_of_tensor_parallelism(tp, shards, world,
                                                                     rejected, remat):
    resolved, found = outcome(TP, str(tp), SHARDS, str(shards), world=world)
    assert bool([p for p in found if {SHARDS, TP} <= set(p.flags)]) is rejected
    if not rejected:
        assert found == []
        assert resolved.gtp_weight_remat_size == remat


@pytest.mark.parametrize("world, rejected, data_parallel", [(2, True, None), (4, False, 1),
                                                            (8, False, 2)])
def test_weight_shards_count_in_the_model_replica(world, rejected, data_parallel):
    """TP 2 with 4 weight shards: a replica spans TP x remat = 4 ranks."""
    resolved, found = outcome(TP, "2", SHARDS, "4", world=world)
    assert bool([p for p in found if "WORLD_SIZE" in p.flags]) is rejected
    if not rejected:
        assert resolved.data_parallel_size == data_parallel
