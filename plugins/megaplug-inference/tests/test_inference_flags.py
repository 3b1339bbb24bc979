"""The inference plugin's flags match Megatron's parser, and parse as Megatron's do."""

from __future__ import annotations

import pytest

import megaplug
from megaplug import TorchDType
from megaplug_inference.enums import InferenceCudaGraphScope


def test_defaults_match_megatron(resolve):
    resolved = resolve()
    assert resolved.inference_max_requests == 8
    assert resolved.inference_max_seq_length == 2560
    assert resolved.inference_dynamic_batching_buffer_size_gb == 40.0
    assert resolved.inference_dynamic_batching_prefix_caching_eviction_policy == "ref_zero"
    assert resolved.inference_dynamic_batching_prefix_caching_coordinator_policy == "load_balanced"
    assert resolved.inference_dynamic_batching_prefix_caching_routing_alpha == 0.5
    assert resolved.inference_dynamic_batching_cuda_graph_sizing_distribution == "exponential"
    assert resolved.inference_dynamic_batching_async_sched_mode == "legacy"
    assert resolved.bert_embedder_type == "megatron"
    assert resolved.offset_sampling_seed_by_dp_rank is True
    assert resolved.kv_cache_management_mode == "persist"
    assert resolved.static_kv_memory_pointers is False
    assert resolved.disagg_kv_transport_backend == "nixl"
    assert resolved.inference_cuda_graph_scope is InferenceCudaGraphScope.none


def test_boolean_optional_flags_have_both_spellings(resolve):
    on = resolve("--inference-dynamic-batching-prefix-caching", "--inference-wandb-logging",
                 "--inference-static-kv-memory-pointers")
    assert on.inference_dynamic_batching_enable_prefix_caching is True
    assert on.inference_wandb_logging is True and on.static_kv_memory_pointers is True
    off = resolve("--inference-dynamic-batching-prefix-caching",
                  "--no-inference-dynamic-batching-prefix-caching")
    assert off.inference_dynamic_batching_enable_prefix_caching is False


def test_renamed_dests(resolve):
    resolved = resolve("--use-same-sampling-seed-across-dp-ranks",
                       "--inference-kv-cache-management-mode", "offload")
    assert resolved.offset_sampling_seed_by_dp_rank is False
    assert resolved.kv_cache_management_mode == "offload"


def test_untyped_choice_flag_is_declared_without_a_type(kernel):
    spec = kernel.table.by_dest["bert_embedder_type"][0]
    assert spec.type is None and spec.choices == ("megatron", "huggingface")
    shards = kernel.table.by_dest["inference_shards"][0]
    assert shards.metavar == "SPEC" and shards.type is str


def test_values_parse(resolve):
    resolved = resolve("--num-speculative-tokens", "3", "--inference-shards",
                       "tp=2,role=prefill+tp=1,dp=2,role=decode",
                       "--inference-dynamic-batching-unified-memory-level", "1",
                       "--symmetric-ar-type", "one_shot",
                       "--inference-dynamic-batching-max-tokens", "4096")
    assert resolved.num_speculative_tokens == 3
    assert resolved.inference_shards == "tp=2,role=prefill+tp=1,dp=2,role=decode"
    assert resolved.inference_dynamic_batching_unified_memory_level == 1
    assert resolved.symmetric_ar_type == "one_shot"
    assert resolved.inference_dynamic_batching_max_tokens == 4096


@pytest.mark.parametrize("argv, fragment", [
    (("--inference-dynamic-batching-unified-memory-level", "2"),
     "--inference-dynamic-batching-unified-memory-level"),
    (("--inference-cuda-graph-scope", "full"), "--inference-cuda-graph-scope"),
    (("--mamba-inference-ssm-states-dtype", "fp8"), "--mamba-inference-ssm-states-dtype"),
    (("--inference-max-requests", "eight"), "--inference-max-requests"),
])
def test_bad_values_are_rejected(resolve, argv, fragment):
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*argv)
    assert any(fragment in p.message for p in info.value.problems)


def test_mamba_state_dtypes_become_torch_dtypes(resolve):
    resolved = resolve("--mamba-inference-conv-states-dtype", "fp32")
    assert resolved.mamba_inference_conv_states_dtype == TorchDType("float32")
    assert resolved.mamba_inference_ssm_states_dtype == TorchDType("bfloat16")
    assert resolved.source("mamba_inference_ssm_states_dtype").plugin == "inference"
