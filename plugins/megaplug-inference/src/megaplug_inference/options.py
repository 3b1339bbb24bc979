"""The settings of the inference plugin."""


from typing import Literal, Optional, Union


from megaplug import Flag, FlagDeclarations, TorchDType, options

from .enums import InferenceCudaGraphScope

#: A Mamba state dtype: a name on the command line, a torch dtype once derived.
StateDType = Union[str, TorchDType]
_STATE_DTYPES = ("bf16", "fp16", "fp32")


@options
class InferenceModelOptions:
    """Model-side switches that only matter when serving."""

    inference_cuda_graph_scope: Union[str, InferenceCudaGraphScope, None] = Flag(
        default=None,
        type=str, choices=("none", "layer", "block"),
        help="What inference captures in CUDA graphs: nothing, each layer, or the whole "
             "block; the default follows --cuda-graph-impl.")
    flash_decode: bool = Flag(
        default=False,
        help="Use the flash-decoding kernels for decode steps.")
    symmetric_ar_type: Optional[Literal["two_shot", "one_shot", "multimem_all_reduce"]] = Flag(
            default=None,
            help="All-reduce algorithm on symmetric memory for tensor-parallel inference.")
    nccl_all_reduce_for_prefill: bool = Flag(
        default=False,
        help="Use NCCL rather than symmetric-memory all-reduce during prefill.")
    inference_fuse_tp_communication: bool = Flag(
        default=False,
        help="Fuse tensor-parallel communication with neighbouring inference kernels.")
    inference_disable_triton_nvls_kernels: bool = Flag(
        default=False,
        help="Do not use the Triton NVLS collective kernels in inference.")
    inference_grouped_gemm_backend: Literal["flashinfer", "torch", "vllm"] = Flag(
        default="vllm",
        help="Kernel library for grouped expert GEMMs in inference.")
    inference_moe_disable_fused_quant_kernels: bool = Flag(
        default=False,
        help="Do not use fused quantization kernels in inference MoE layers.")
    inference_moe_token_dispatcher_type: Literal["nccl", "nvls"] = Flag(
        default="nvls",
        help="How inference MoE layers dispatch tokens to experts.")
    mlp_chunks_for_prefill: int = Flag(
        default=1,
        help="Split the MLP of a prefill step into this many chunks to bound memory.")
    inference_rng_tracker: bool = Flag(
        default=False,
        help="Use the inference RNG tracker instead of the training one.")


@options
class InferenceEngineOptions:
    """The inference engine: batching, caching, CUDA graphs, serving."""

    inference_batch_times_seqlen_threshold: int = Flag(
        default=-1,
        help="Split batches for pipelined inference only above this batch x sequence size; "
             "-1 turns splitting off.")
    max_tokens_to_oom: int = Flag(
        default=12000,
        help="Refuse requests whose prompt plus generated tokens exceed this many.")
    output_bert_embeddings: bool = Flag(
        default=False,
        help="Return mean-pooled BERT embeddings instead of the model's head output.")
    use_legacy_static_engine: bool = Flag(
        default=False,
        help="Use the legacy static inference engine instead of the dynamic one.")
    inference_max_requests: int = Flag(default=8, help="Most requests served at once.")
    inference_max_seq_length: int = Flag(
        default=2560,
        help="Longest sequence (prompt plus generation) inference expects.")
    inference_dynamic_batching: bool = Flag(default=False, help="Serve with dynamic batching.")
    inference_dynamic_batching_buffer_size_gb: float = Flag(
        default=40.0,
        help="GPU memory of the shared KV cache block pool, in GB.")
    inference_dynamic_batching_paused_buffer_size_gb: Optional[float] = Flag(
        default=None,
        help="Memory budget, in GB, for the KV blocks paused requests may keep.")
    inference_dynamic_batching_mamba_memory_ratio: Optional[float] = Flag(
        default=None,
        help="Share of the buffer for Mamba states in hybrid models; unset gives each KV "
             "block its own Mamba state.")
    inference_dynamic_batching_block_size: int = Flag(
        default=256,
        help="Tokens per KV cache block (a multiple of 256).")
    inference_dynamic_batching_max_requests: Optional[int] = Flag(
        default=None,
        help="Override the dynamic context's request limit (by default the number of "
             "blocks).")
    inference_dynamic_batching_max_tokens: Optional[int] = Flag(
        default=None,
        help="Override the dynamic context's token limit.")
    inference_dynamic_batching_num_cuda_graphs: int = Flag(
        default=16,
        help="Most CUDA graphs to capture for dynamic batching; -1 chooses from the request "
             "limit.")
    inference_dynamic_batching_track_paused_request_events: bool = Flag(
        default=False,
        help="Record pause events in each request's history.")
    inference_dynamic_batching_track_generated_token_events: bool = Flag(
        default=False,
        help="Record a timestamped event for every generated token.")
    decode_only_cuda_graphs: bool = Flag(
        default=False,
        help="Use CUDA graphs only for decode-only steps.")
    inference_cuda_graph_all_prefills: bool = Flag(
        default=False,
        help="Capture prefill and mixed CUDA graphs up to the token limit.")
    inference_cuda_graph_max_tokens: int = Flag(
        default=512,
        help="Token count of the largest captured prefill or mixed CUDA graph.")
    inference_dynamic_batching_unified_memory_level: Literal[0, 1] = Flag(
        default=0,
        help="Unified memory in the dynamic context: 0 none, 1 the memory buffer.")
    kv_cache_management_mode: Literal["persist", "offload", "recompute"] = Flag(
        "--inference-kv-cache-management-mode", default="persist",
        help="What a suspended engine does with its KV cache: keep it on the GPU, move it to "
             "the CPU, or free and recompute it.")
    static_kv_memory_pointers: bool = Flag(
        "--inference-static-kv-memory-pointers", default=False, action="boolean_optional",
        help="Keep the KV cache at fixed addresses across suspend and resume so CUDA graphs "
             "stay valid.")
    enable_chunked_prefill: bool = Flag(default=False, help="Split long prefills into chunks.")
    num_speculative_tokens: int = Flag(
        default=0,
        help="Tokens drafted speculatively per decode step.")
    inference_dynamic_batching_enable_prefix_caching: bool = Flag(
        "--inference-dynamic-batching-prefix-caching", default=False, action="boolean_optional",
        help="Share KV cache blocks between requests with the same prompt prefix.")
    inference_dynamic_batching_prefix_caching_eviction_policy: Literal["ref_zero", "lru"] = Flag(
            default="ref_zero",
            help="When cached prefix blocks are freed: as soon as unused, or least recently "
                 "used first when space runs out.")
    inference_dynamic_batching_prefix_caching_coordinator_policy: Literal[
        "longest_prefix", "first_prefix_block", "load_balanced"] = Flag(
            default="load_balanced",
            help="How the coordinator routes requests with prefix caching.")
    inference_dynamic_batching_prefix_caching_routing_alpha: float = Flag(
        default=0.5,
        help="Weight of rank load against prefix affinity when routing.")
    inference_dynamic_batching_prefix_cache_ttl_seconds: float = Flag(
        default=300.0,
        help="Seconds the coordinator assumes an engine keeps a block it routed there.")
    inference_dynamic_batching_media_cache_coordinator_policy: Literal[
        "affinity", "load_balanced"] = Flag(
            default="affinity",
            help="How the coordinator routes requests with cached media.")
    inference_dynamic_batching_media_cache_routing_weight: float = Flag(
        default=1.0,
        help="Weight of a media-cache hit, in prompt blocks, when routing.")
    inference_dynamic_batching_vision_embedding_cache_max_bytes: int = Flag(
        default=0,
        help="GPU bytes per engine for reusable vision embeddings; 0 turns the cache "
             "off.")
    inference_dynamic_batching_allow_stale_multimodal_embeddings: bool = Flag(
        default=False,
        help="Keep multimodal embeddings across suspend, resume and generation epochs "
             "(only when weights do not change).")
    inference_dynamic_batching_prefix_caching_mamba_gb: Optional[float] = Flag(
        default=None,
        help="GPU memory, in GB, for caching Mamba states for prefix caching in hybrid "
             "models.")
    inference_dynamic_batching_cuda_graph_mixed_prefill_count: int = Flag(
        default=16,
        help="Mixed prefill requests captured in one CUDA graph.")
    inference_dynamic_batching_cuda_graph_sizing_distribution: Literal[
        "exponential", "linear"] = Flag(
            default="exponential",
            help="How captured CUDA graph token counts are spaced.")
    inference_dynamic_batching_sampling_backend: Literal["torch", "flashinfer"] = Flag(
        default="torch",
        help="Sampling kernels used during inference.")
    offset_sampling_seed_by_dp_rank: bool = Flag(
        "--use-same-sampling-seed-across-dp-ranks", default=True,
        help="Sample with the same seed on every data-parallel rank.")
    inference_dynamic_batching_async_sched_mode: Literal["legacy", "async"] = Flag(
        default="legacy",
        help="Scheduling of dynamic batching steps: legacy, or async overlapping of "
             "scheduling phases.")
    inference_dynamic_batching_logprobs_mode: Literal["raw_logprobs", "processed_logprobs"] = Flag(
            default="raw_logprobs",
            help="Log-probs from the raw logits, or after temperature and top-k/top-p.")
    inference_logging_step_interval: int = Flag(
        default=0,
        help="Log inference metrics every this many steps; 0 turns logging off.")
    inference_text_gen_server_logging: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Log every request in the text generation server.")
    inference_wandb_logging: bool = Flag(
        default=False,
        action="boolean_optional", help="Log inference metrics to Weights & Biases.")
    inference_coordinator_port: Optional[int] = Flag(
        default=None,
        help="Port of the inference coordinator on node 0.")
    mamba_inference_conv_states_dtype: StateDType = Flag(
        default="bf16",
        type=str, choices=_STATE_DTYPES, help="Dtype of Mamba conv states in inference.")
    mamba_inference_ssm_states_dtype: StateDType = Flag(
        default="bf16",
        type=str, choices=_STATE_DTYPES, help="Dtype of Mamba SSM states in inference.")
    inference_use_synchronous_zmq_collectives: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Use synchronous ZMQ collectives, steadying MoE inference performance.")
    inference_disable_ep_consensus: bool = Flag(
        default=False,
        action="boolean_optional",
        help="Skip the expert-parallel consensus step in inference.")
    inference_shards: Optional[str] = Flag(
        default=None,
        metavar="SPEC",
        help="Split the world into independent inference models, e.g. "
             "'tp=2,role=prefill+tp=1,dp=2,role=decode'.")
    disagg_kv_transport_backend: Literal["nccl", "nixl"] = Flag(
        default="nixl",
        help="How disaggregated inference moves KV state: two-sided NCCL or one-sided NIXL "
             "pulls.")


@options
class InferenceOptions(InferenceEngineOptions, InferenceModelOptions):
    """Every inference setting declared as a flag with a type (see ``declare``)."""


def declare(flags: FlagDeclarations) -> None:
    """Every inference flag: the options class, and a flag Megatron declares without a type
    converter (choices of plain strings)."""
    flags.add_options(InferenceOptions)
    flags.add_argument("--bert-embedder-type", default="megatron",
                       choices=["megatron", "huggingface"],
                       help="Which implementation embeds text for BERT: Megatron or Hugging Face.")

