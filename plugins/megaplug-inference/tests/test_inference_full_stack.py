"""The inference plugin together with the real built-in plugins (training owns the impl)."""

from __future__ import annotations

from typing import Sequence

import pytest

import megaplug
from megaplug_inference.enums import InferenceCudaGraphScope as Scope

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0"}


def resolve(extra: Sequence[str]) -> megaplug.Resolved:
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=(9, 0))
    return megaplug.resolve([*DENSE_GPT, *extra], environ=ENVIRON, target=target)


@pytest.mark.parametrize("extra, scope", [
    ((), Scope.none),
    (("--enable-cuda-graph",), Scope.layer),
    (("--cuda-graph-impl", "local"), Scope.layer),
    (("--cuda-graph-impl", "transformer_engine"), Scope.none),
    (("--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration_inference"),
     Scope.block),
])
def test_scope_after_training_normalized_the_impl(extra, scope):
    assert resolve(extra).inference_cuda_graph_scope is scope


def test_scope_not_allowed_for_the_impl_is_rejected():
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(["--cuda-graph-impl", "transformer_engine", "--inference-cuda-graph-scope",
                 "layer"])
    assert [p.message for p in info.value.problems if p.plugin == "inference"] == [
        "--inference-cuda-graph-scope layer is not supported with --cuda-graph-impl "
        "transformer_engine (supported: none)"]
