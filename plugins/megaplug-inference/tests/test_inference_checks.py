"""The inference CUDA-graph scope and the engine checks."""

from __future__ import annotations

import pytest

import megaplug
from megaplug_inference.enums import InferenceCudaGraphScope as Scope


@pytest.mark.parametrize("impl, scope", [
    ("none", Scope.none),
    ("local", Scope.layer),
    ("transformer_engine", Scope.none),
    ("full_iteration", Scope.none),
])
def test_scope_default_follows_the_impl(resolve, impl, scope):
    resolved = resolve("--cuda-graph-impl", impl)
    assert resolved.inference_cuda_graph_scope is scope
    assert resolved.source("inference_cuda_graph_scope").plugin == "inference"


@pytest.mark.parametrize("scope", ["layer", "block"])
def test_local_allows_layer_and_block_scopes(resolve, scope):
    resolved = resolve("--cuda-graph-impl", "local", "--inference-cuda-graph-scope", scope)
    assert resolved.inference_cuda_graph_scope is Scope[scope]


def test_local_graphs_always_capture_inference(problems):
    # megatron.core allows only layer and block with the local implementation
    assert problems("--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "none") == [
        "--inference-cuda-graph-scope none is not supported with --cuda-graph-impl local "
        "(supported: layer, block)"]


@pytest.mark.parametrize("impl, scope", [
    ("none", "layer"), ("none", "block"), ("transformer_engine", "block"),
    ("full_iteration", "layer"),
])
def test_other_impls_reject_inference_scopes(problems, impl, scope):
    assert problems("--cuda-graph-impl", impl, "--inference-cuda-graph-scope", scope) == [
        f"--inference-cuda-graph-scope {scope} is not supported with --cuda-graph-impl {impl} "
        "(supported: none)"]


def test_explicit_none_is_accepted_without_local_graphs(problems):
    for impl in ("none", "transformer_engine", "full_iteration"):
        assert problems("--cuda-graph-impl", impl, "--inference-cuda-graph-scope", "none") == []


def test_scope_migrated_by_training_is_normalized(resolve, problems):
    resolved = resolve("--cuda-graph-impl", "local", "--cuda-graph-modules",
                       "full_iteration_inference")
    assert resolved.inference_cuda_graph_scope is Scope.block


def test_num_cuda_graphs_with_local_graphs(problems):
    local = ("--cuda-graph-impl", "local")
    assert problems(*local, "--inference-dynamic-batching-num-cuda-graphs", "-1") == []
    assert problems(*local, "--inference-dynamic-batching-num-cuda-graphs", "4") == []
    assert problems(*local, "--inference-dynamic-batching-num-cuda-graphs", "0") == [
        "--inference-dynamic-batching-num-cuda-graphs must be a positive number or -1 with "
        "--cuda-graph-impl local, got 0"]
    assert problems("--inference-dynamic-batching-num-cuda-graphs", "0") == []


def test_batch_split_threshold_needs_pipelines(problems):
    assert problems("--inference-batch-times-seqlen-threshold", "512") == [
        "--inference-batch-times-seqlen-threshold 512 needs pipeline parallelism "
        "(--pipeline-model-parallel-size 1)"]
    assert problems("--inference-batch-times-seqlen-threshold", "512",
                    "--pipeline-model-parallel-size", "2") == []


def test_batch_split_threshold_rules_out_cuda_graphs(problems):
    found = problems("--inference-batch-times-seqlen-threshold", "512",
                     "--pipeline-model-parallel-size", "2", "--cuda-graph-impl", "local")
    assert found == ["--inference-batch-times-seqlen-threshold 512 (pipelined micro-batched "
                     "inference) cannot be used with --cuda-graph-impl local"]


def test_blocked_plugin_flags_name_the_plugin(make_kernel):
    kernel = make_kernel(block=("inference",))
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve(["--inference-dynamic-batching"], environ={})
    [problem] = info.value.problems
    assert problem.message == ("--inference-dynamic-batching belongs to plugin 'inference', "
                               "which is blocked: blocked by -p no: / MEGAPLUG_DISABLE")


def test_blocked_entry_point_rejects_its_flags():
    kernel, rest = megaplug.load(["-p", "no:inference", "--flash-decode"])
    assert kernel.plugins.records["inference"].status == "blocked"
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve(rest, environ={})
    assert any(p.message.startswith("--flash-decode belongs to plugin 'inference'")
               for p in info.value.problems)


# -- retired module spellings that mean an inference scope ---------------------------------


def test_full_iteration_inference_becomes_the_block_scope(kernel):
    resolved = kernel.resolve(["--cuda-graph-impl", "local", "--cuda-graph-modules",
                               "full_iteration_inference", "attn"], environ={},
                              target=megaplug.TargetEnvironment(device_capability=(9, 0)))
    assert resolved.inference_cuda_graph_scope is Scope.block
    assert resolved.cuda_graph_modules == ["attn"]
    assert any("setting --inference-cuda-graph-scope=block" in w.message
               for w in resolved.warnings)
    assert resolved.source("inference_cuda_graph_scope").history()[1].rule == (
        "migrate_retired_module_spelling")


def test_full_iteration_inference_has_no_effect_without_graphs(resolve):
    resolved = resolve("--cuda-graph-modules", "full_iteration_inference")
    assert resolved.inference_cuda_graph_scope is Scope.none
    assert any("has no effect with --cuda-graph-impl none" in w.message
               for w in resolved.warnings)


def test_retired_modules_conflict_with_another_explicit_scope(resolve, problems):
    assert problems("--cuda-graph-impl", "local", "--cuda-graph-modules",
                    "full_iteration_inference", "--inference-cuda-graph-scope", "layer") == [
        "--cuda-graph-modules full_iteration_inference cannot be combined with "
        "--inference-cuda-graph-scope layer"]
    assert problems("--cuda-graph-impl", "local", "--cuda-graph-modules", "full_iteration",
                    "--inference-cuda-graph-scope", "layer") == [
        "--cuda-graph-modules full_iteration cannot be combined with "
        "--inference-cuda-graph-scope layer"]
    assert resolve("--cuda-graph-impl", "local", "--cuda-graph-modules",
                   "full_iteration_inference", "--inference-cuda-graph-scope",
                   "block").inference_cuda_graph_scope is Scope.block


# -- fp8 under block-scoped graphs ---------------------------------------------------------


def test_fp8_with_block_scoped_inference_graphs(problems):
    argv = ("--cuda-graph-impl", "local", "--fp8-format", "e4m3",
            "--inference-cuda-graph-scope", "block")
    assert problems(*argv) == [
        "fp8 with --inference-cuda-graph-scope block needs --transformer-impl inference_optimized",
        "fp8 with --inference-cuda-graph-scope block supports only --fp8-recipe mxfp8, got delayed"]
    assert problems(*argv, "--transformer-impl", "inference_optimized", "--fp8-recipe",
                    "mxfp8") == []
