"""The measuring script's stand-in collectives: what a real collective would have written,
in the output's own storage (a temporary there is memory Megatron never asks for)."""

from __future__ import annotations

import pytest

from measure_batches import script

torch = pytest.importorskip("torch", reason="the stand-in fills torch tensors")


def test_all_gather_output_is_the_input_once_per_rank_in_place():
    tile = script().tile
    shard = torch.arange(6, dtype=torch.bfloat16)
    gathered = torch.zeros(4 * 6, dtype=torch.bfloat16)
    storage = gathered.data_ptr()
    tile(gathered, shard)
    assert gathered.data_ptr() == storage
    assert torch.equal(gathered.view(4, 6), shard.expand(4, 6))


def test_the_stand_in_allocates_nothing():
    """Every tensor an operation of the stand-in returns lives in the input's or the
    output's storage (the repeat() of batches A-C returned a new one of the output's size)."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    tile = script().tile
    shard, gathered = torch.randn(1000), torch.zeros(8000)
    known = {shard.untyped_storage().data_ptr(), gathered.untyped_storage().data_ptr()}
    allocated = []

    class Storages(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            for leaf in tree_leaves(result):
                if isinstance(leaf, torch.Tensor) and leaf.numel() and (
                        leaf.untyped_storage().data_ptr() not in known):
                    allocated.append((str(func), leaf.numel()))
            return result

    with Storages():
        tile(gathered, shard)
    assert allocated == []
    assert torch.equal(gathered.view(8, 1000), shard.expand(8, 1000))


def test_a_remainder_is_cut_short_and_shapes_are_kept():
    tile = script().tile
    out = torch.zeros(2, 5)
    tile(out, torch.tensor([1.0, 2.0, 3.0]))
    assert out.shape == (2, 5)
    assert out.flatten().tolist() == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]


def test_all_to_all_of_equal_sizes_copies_and_empty_tensors_are_left_alone():
    tile = script().tile
    source = torch.randn(3, 4)
    out = torch.empty(3, 4)
    tile(out, source)
    assert torch.equal(out, source)
    untouched = torch.full((3,), 7.0)
    tile(untouched, torch.empty(0))
    assert untouched.tolist() == [7.0, 7.0, 7.0]
