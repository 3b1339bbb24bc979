"""The settings of the inference plugin."""


from typing import TYPE_CHECKING, Literal, Optional, Union

from typing_extensions import Annotated

from megaplug import Flag, TorchDType, options

from .enums import InferenceCudaGraphScope

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

#: A Mamba state dtype: a name on the command line, a torch dtype once derived.
StateDType = Union[str, TorchDType]
_STATE_DTYPES = ("bf16", "fp16", "fp32")


@options
class InferenceModelOptions:
    """Model-side switches that only matter when serving."""

    inference_cuda_graph_scope: Annotated[Union[str, InferenceCudaGraphScope, None], Flag(
        type=str, choices=("none", "layer", "block"),
        help="What inference captures in CUDA graphs: nothing, each layer, or the whole "
             "block; the default follows --cuda-graph-impl.")] = None
    flash_decode: Annotated[bool, Flag(
        help="Use the flash-decoding kernels for decode steps.")] = False
    symmetric_ar_type: Annotated[
        Optional[Literal["two_shot", "one_shot", "multimem_all_reduce"]], Flag(
            help="All-reduce algorithm on symmetric memory for tensor-parallel inference.")] = None
    nccl_all_reduce_for_prefill: Annotated[bool, Flag(
        help="Use NCCL rather than symmetric-memory all-reduce during prefill.")] = False
    inference_fuse_tp_communication: Annotated[bool, Flag(
        help="Fuse tensor-parallel communication with neighbouring inference kernels.")] = False
    inference_disable_triton_nvls_kernels: Annotated[bool, Flag(
        help="Do not use the Triton NVLS collective kernels in inference.")] = False
    inference_grouped_gemm_backend: Annotated[Literal["flashinfer", "torch", "vllm"], Flag(
        help="Kernel library for grouped expert GEMMs in inference.")] = "vllm"
    inference_moe_disable_fused_quant_kernels: Annotated[bool, Flag(
        help="Do not use fused quantization kernels in inference MoE layers.")] = False
    inference_moe_token_dispatcher_type: Annotated[Literal["nccl", "nvls"], Flag(
        help="How inference MoE layers dispatch tokens to experts.")] = "nvls"
    mlp_chunks_for_prefill: Annotated[int, Flag(
        help="Split the MLP of a prefill step into this many chunks to bound memory.")] = 1
    inference_rng_tracker: Annotated[bool, Flag(
        help="Use the inference RNG tracker instead of the training one.")] = False


@options
class InferenceEngineOptions:
    """The inference engine: batching, caching, CUDA graphs, serving."""

    inference_batch_times_seqlen_threshold: Annotated[int, Flag(
        help="Split batches for pipelined inference only above this batch x sequence size; "
             "-1 turns splitting off.")] = -1
    max_tokens_to_oom: Annotated[int, Flag(
        help="Refuse requests whose prompt plus generated tokens exceed this many.")] = 12000
    output_bert_embeddings: Annotated[bool, Flag(
        help="Return mean-pooled BERT embeddings instead of the model's head output.")] = False
    use_legacy_static_engine: Annotated[bool, Flag(
        help="Use the legacy static inference engine instead of the dynamic one.")] = False
    inference_max_requests: Annotated[int, Flag(
        help="Most requests served at once.")] = 8
    inference_max_seq_length: Annotated[int, Flag(
        help="Longest sequence (prompt plus generation) inference expects.")] = 2560
    inference_dynamic_batching: Annotated[bool, Flag(
        help="Serve with dynamic batching.")] = False
    inference_dynamic_batching_buffer_size_gb: Annotated[float, Flag(
        help="GPU memory of the shared KV cache block pool, in GB.")] = 40.0
    inference_dynamic_batching_paused_buffer_size_gb: Annotated[Optional[float], Flag(
        help="Memory budget, in GB, for the KV blocks paused requests may keep.")] = None
    inference_dynamic_batching_mamba_memory_ratio: Annotated[Optional[float], Flag(
        help="Share of the buffer for Mamba states in hybrid models; unset gives each KV "
             "block its own Mamba state.")] = None
    inference_dynamic_batching_block_size: Annotated[int, Flag(
        help="Tokens per KV cache block (a multiple of 256).")] = 256
    inference_dynamic_batching_max_requests: Annotated[Optional[int], Flag(
        help="Override the dynamic context's request limit (by default the number of "
             "blocks).")] = None
    inference_dynamic_batching_max_tokens: Annotated[Optional[int], Flag(
        help="Override the dynamic context's token limit.")] = None
    inference_dynamic_batching_num_cuda_graphs: Annotated[int, Flag(
        help="Most CUDA graphs to capture for dynamic batching; -1 chooses from the request "
             "limit.")] = 16
    inference_dynamic_batching_track_paused_request_events: Annotated[bool, Flag(
        help="Record pause events in each request's history.")] = False
    inference_dynamic_batching_track_generated_token_events: Annotated[bool, Flag(
        help="Record a timestamped event for every generated token.")] = False
    decode_only_cuda_graphs: Annotated[bool, Flag(
        help="Use CUDA graphs only for decode-only steps.")] = False
    inference_cuda_graph_all_prefills: Annotated[bool, Flag(
        help="Capture prefill and mixed CUDA graphs up to the token limit.")] = False
    inference_cuda_graph_max_tokens: Annotated[int, Flag(
        help="Token count of the largest captured prefill or mixed CUDA graph.")] = 512
    inference_dynamic_batching_unified_memory_level: Annotated[Literal[0, 1], Flag(
        help="Unified memory in the dynamic context: 0 none, 1 the memory buffer.")] = 0
    kv_cache_management_mode: Annotated[Literal["persist", "offload", "recompute"], Flag(
        "--inference-kv-cache-management-mode",
        help="What a suspended engine does with its KV cache: keep it on the GPU, move it to "
             "the CPU, or free and recompute it.")] = "persist"
    static_kv_memory_pointers: Annotated[bool, Flag(
        "--inference-static-kv-memory-pointers", action="boolean_optional",
        help="Keep the KV cache at fixed addresses across suspend and resume so CUDA graphs "
             "stay valid.")] = False
    enable_chunked_prefill: Annotated[bool, Flag(
        help="Split long prefills into chunks.")] = False
    num_speculative_tokens: Annotated[int, Flag(
        help="Tokens drafted speculatively per decode step.")] = 0
    inference_dynamic_batching_enable_prefix_caching: Annotated[bool, Flag(
        "--inference-dynamic-batching-prefix-caching", action="boolean_optional",
        help="Share KV cache blocks between requests with the same prompt prefix.")] = False
    inference_dynamic_batching_prefix_caching_eviction_policy: Annotated[
        Literal["ref_zero", "lru"], Flag(
            help="When cached prefix blocks are freed: as soon as unused, or least recently "
                 "used first when space runs out.")] = "ref_zero"
    inference_dynamic_batching_prefix_caching_coordinator_policy: Annotated[
        Literal["longest_prefix", "first_prefix_block", "load_balanced"], Flag(
            help="How the coordinator routes requests with prefix caching.")] = "load_balanced"
    inference_dynamic_batching_prefix_caching_routing_alpha: Annotated[float, Flag(
        help="Weight of rank load against prefix affinity when routing.")] = 0.5
    inference_dynamic_batching_prefix_cache_ttl_seconds: Annotated[float, Flag(
        help="Seconds the coordinator assumes an engine keeps a block it routed there.")] = 300.0
    inference_dynamic_batching_media_cache_coordinator_policy: Annotated[
        Literal["affinity", "load_balanced"], Flag(
            help="How the coordinator routes requests with cached media.")] = "affinity"
    inference_dynamic_batching_media_cache_routing_weight: Annotated[float, Flag(
        help="Weight of a media-cache hit, in prompt blocks, when routing.")] = 1.0
    inference_dynamic_batching_vision_embedding_cache_max_bytes: Annotated[int, Flag(
        help="GPU bytes per engine for reusable vision embeddings; 0 turns the cache "
             "off.")] = 0
    inference_dynamic_batching_allow_stale_multimodal_embeddings: Annotated[bool, Flag(
        help="Keep multimodal embeddings across suspend, resume and generation epochs "
             "(only when weights do not change).")] = False
    inference_dynamic_batching_prefix_caching_mamba_gb: Annotated[Optional[float], Flag(
        help="GPU memory, in GB, for caching Mamba states for prefix caching in hybrid "
             "models.")] = None
    inference_dynamic_batching_cuda_graph_mixed_prefill_count: Annotated[int, Flag(
        help="Mixed prefill requests captured in one CUDA graph.")] = 16
    inference_dynamic_batching_cuda_graph_sizing_distribution: Annotated[
        Literal["exponential", "linear"], Flag(
            help="How captured CUDA graph token counts are spaced.")] = "exponential"
    inference_dynamic_batching_sampling_backend: Annotated[Literal["torch", "flashinfer"], Flag(
        help="Sampling kernels used during inference.")] = "torch"
    offset_sampling_seed_by_dp_rank: Annotated[bool, Flag(
        "--use-same-sampling-seed-across-dp-ranks",
        help="Sample with the same seed on every data-parallel rank.")] = True
    inference_dynamic_batching_async_sched_mode: Annotated[Literal["legacy", "async"], Flag(
        help="Scheduling of dynamic batching steps: legacy, or async overlapping of "
             "scheduling phases.")] = "legacy"
    inference_dynamic_batching_logprobs_mode: Annotated[
        Literal["raw_logprobs", "processed_logprobs"], Flag(
            help="Log-probs from the raw logits, or after temperature and top-k/top-p.")] = \
        "raw_logprobs"
    inference_logging_step_interval: Annotated[int, Flag(
        help="Log inference metrics every this many steps; 0 turns logging off.")] = 0
    inference_text_gen_server_logging: Annotated[bool, Flag(
        action="boolean_optional",
        help="Log every request in the text generation server.")] = False
    inference_wandb_logging: Annotated[bool, Flag(
        action="boolean_optional", help="Log inference metrics to Weights & Biases.")] = False
    inference_coordinator_port: Annotated[Optional[int], Flag(
        help="Port of the inference coordinator on node 0.")] = None
    mamba_inference_conv_states_dtype: Annotated[StateDType, Flag(
        type=str, choices=_STATE_DTYPES, help="Dtype of Mamba conv states in inference.")] = "bf16"
    mamba_inference_ssm_states_dtype: Annotated[StateDType, Flag(
        type=str, choices=_STATE_DTYPES, help="Dtype of Mamba SSM states in inference.")] = "bf16"
    inference_use_synchronous_zmq_collectives: Annotated[bool, Flag(
        action="boolean_optional",
        help="Use synchronous ZMQ collectives, steadying MoE inference performance.")] = False
    inference_disable_ep_consensus: Annotated[bool, Flag(
        action="boolean_optional",
        help="Skip the expert-parallel consensus step in inference.")] = False
    inference_shards: Annotated[Optional[str], Flag(
        metavar="SPEC",
        help="Split the world into independent inference models, e.g. "
             "'tp=2,role=prefill+tp=1,dp=2,role=decode'.")] = None
    disagg_kv_transport_backend: Annotated[Literal["nccl", "nixl"], Flag(
        help="How disaggregated inference moves KV state: two-sided NCCL or one-sided NIXL "
             "pulls.")] = "nixl"


@options
class InferenceOptions(InferenceEngineOptions, InferenceModelOptions):
    """Every inference setting declared as a flag with a type (see ``declare_untyped_flags``)."""


def declare_untyped_flags(flags: "FlagDeclarations") -> None:
    """Flags Megatron declares without a type converter (choices of plain strings)."""
    flags.add_argument("--bert-embedder-type", default="megatron",
                       choices=["megatron", "huggingface"],
                       help="Which implementation embeds text for BERT: Megatron or Hugging Face.")

