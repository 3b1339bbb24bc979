"""The training plugin: CUDA graph settings."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import megaplug  # noqa: E402
from megaplug.values._encoding import encode  # noqa: E402
from megaplug.builtin.training.enums import CudaGraphModule  # noqa: E402
from megaplug.builtin.training.enums import parse_cuda_graph_module  # noqa: E402

from _training_stub import messages, resolve, warnings  # noqa: E402


def test_modules_become_enum_members():
    resolved = resolve("--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                       "attn", "mlp", "moe_router", "moe_preprocess")
    assert resolved.cuda_graph_modules == [CudaGraphModule.attn, CudaGraphModule.mlp,
                                           CudaGraphModule.moe_router,
                                           CudaGraphModule.moe_preprocess]
    assert encode(resolved.cuda_graph_modules)[0] == "CudaGraphModule.attn"


def test_unknown_module_is_a_readable_error():
    with pytest.raises(ValueError, match="choose from attn, mlp"):
        parse_cuda_graph_module("attention")
    with pytest.raises(megaplug.ConfigError, match="--cuda-graph-modules"):
        resolve("--cuda-graph-modules", "attention")


def test_enable_cuda_graph_means_local_impl():
    resolved = resolve("--enable-cuda-graph")
    assert resolved.cuda_graph_impl == "local"
    assert "--cuda-graph-impl local" in warnings(resolved)
    # Megatron deletes a retired switch once it is translated; the other one stays
    assert "enable_cuda_graph" not in resolved.to_dict()
    assert resolved.external_cuda_graph is False


def test_external_cuda_graph_means_transformer_engine_impl():
    resolved = resolve("--external-cuda-graph")
    assert resolved.cuda_graph_impl == "transformer_engine"
    assert resolved.te_rng_tracker is True
    assert "external_cuda_graph" not in resolved.to_dict()


def test_retired_switches_conflict_with_impl():
    text = messages("--enable-cuda-graph", "--cuda-graph-impl", "local")
    assert "--enable-cuda-graph cannot be combined with --cuda-graph-impl local" in text


def test_retired_switches_conflict_with_each_other():
    text = messages("--enable-cuda-graph", "--external-cuda-graph")
    assert "--enable-cuda-graph and --external-cuda-graph cannot both be set" in text


def test_cuda_graph_scope_is_the_old_modules_flag():
    resolved = resolve("--cuda-graph-scope", "attn")
    assert resolved.cuda_graph_modules == [CudaGraphModule.attn]
    assert "cuda_graph_scope_deprecated" not in resolved
    assert "--cuda-graph-scope is deprecated" in warnings(resolved)


def test_cuda_graph_scope_and_modules_conflict():
    text = messages("--cuda-graph-scope", "attn", "--cuda-graph-modules", "mlp")
    assert "--cuda-graph-scope and --cuda-graph-modules cannot be used together" in text


def test_full_scope_means_the_whole_layer():
    resolved = resolve("--cuda-graph-impl", "local", "--cuda-graph-modules", "full")
    assert resolved.cuda_graph_modules == []
    assert "full is deprecated" in warnings(resolved)


def test_full_iteration_inference_leaves_the_module_list():
    # its meaning, an inference CUDA-graph scope, is migrated by the inference plugin
    resolved = resolve("--cuda-graph-impl", "local", "--cuda-graph-modules",
                       "full_iteration_inference", "attn")
    assert resolved.cuda_graph_modules == [CudaGraphModule.attn]
    assert resolved.cuda_graph_impl == "local"


def test_full_iteration_migrates_to_full_iteration_impl():
    resolved = resolve("--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration",
                       "--no-check-for-nan-in-loss-and-grad")
    assert resolved.cuda_graph_impl == "full_iteration"
    assert resolved.cuda_graph_modules == []


def test_retired_module_needs_local_impl():
    text = messages("--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                    "full_iteration")
    assert "cannot be combined with --cuda-graph-impl transformer_engine" in text


def test_full_iteration_migrates_even_without_an_impl():
    # Megatron skips the migration under impl none only for full_iteration_inference
    resolved = resolve("--no-check-for-nan-in-loss-and-grad", "--cuda-graph-modules",
                       "full_iteration")
    assert resolved.cuda_graph_impl == "full_iteration"
    text = messages("--no-check-for-nan-in-loss-and-grad", "--cuda-graph-modules",
                    "moe_router", "full_iteration")
    assert "cannot be used with --cuda-graph-impl full_iteration" in text


def test_two_retired_modules_at_once():
    text = messages("--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration",
                    "full_iteration_inference")
    assert "several retired spellings" in text


def test_full_iteration_impl_takes_no_modules():
    text = messages("--cuda-graph-impl", "full_iteration", "--cuda-graph-modules", "attn")
    assert "--cuda-graph-modules attn cannot be used with --cuda-graph-impl full_iteration" in text


def test_te_rng_tracker_follows_transformer_engine_graphs():
    assert resolve("--cuda-graph-impl", "local").te_rng_tracker is True  # TE layers
    assert resolve("--cuda-graph-impl", "local", "--transformer-impl", "local").te_rng_tracker \
        is False
    assert resolve().te_rng_tracker is False


def test_expandable_segments_need_nccl_graph_register_off():
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    text = messages("--cuda-graph-impl", "transformer_engine", env=env)
    assert "needs NCCL_GRAPH_REGISTER=0" in text
    resolved = resolve("--cuda-graph-impl", "transformer_engine",
                       env={**env, "NCCL_GRAPH_REGISTER": "0"})
    assert resolved.cuda_graph_impl == "transformer_engine"


def test_full_module_stands_alone():
    text = messages("--cuda-graph-impl", "local", "--cuda-graph-modules", "full", "attn")
    assert "--cuda-graph-modules full cannot be combined with other modules" in text
