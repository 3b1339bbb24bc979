"""Every mixture-of-experts setting, as one options dataclass.

Option strings, types, defaults, choices and nargs follow Megatron-LM's parser; the
help texts are this plugin's own.
"""


from typing import Any, Optional, Union


from megaplug import Flag, options

# the parsers live apart, so that a flag table read from the snapshot imports them alone
from .converters import json_value, moe_freq_type

#: Load-balancing strategies the router understands.
LOAD_BALANCING_TYPES = (
    "aux_loss",
    "seq_aux_loss",
    "global_aux_loss",
    "sinkhorn",
    "quantile_balancing",
    "none",
)




@options
class MoeOptions:
    """Mixture-of-experts settings: experts, routing, dispatch, kernels, tracing."""

    # -- experts and expert parallelism ----------------------------------------------
    num_experts: Optional[int] = Flag(
        default=None,
        help="Number of experts per MoE layer; unset or 0 means a dense model.")
    moe_layer_freq: Union[int, list] = Flag(
        default=1,
        type=moe_freq_type,
        help="Which layers are MoE: N for one in every N layers, or a 0/1 list pattern "
             "such as '([1]*3+[0]*1)*3'.")
    moe_ffn_hidden_size: Optional[int] = Flag(
        default=None,
        help="Hidden size of each expert's MLP; defaults to --ffn-hidden-size.")
    expert_model_parallel_size: int = Flag(
        default=1,
        help="Number of ranks the experts are distributed over (expert parallelism).")
    expert_tensor_parallel_size: Optional[int] = Flag(
        default=None,
        help="Tensor-parallel degree inside each expert; defaults to "
             "--tensor-model-parallel-size.")
    moe_latent_size: Optional[int] = Flag(
        default=None,
        help="Project tokens to this latent dimension before the experts (MoE latent "
             "projections).")

    # -- shared experts --------------------------------------------------------------
    moe_shared_expert_intermediate_size: Optional[int] = Flag(
        default=None,
        help="Total hidden size of the shared experts; unset means no shared expert.")
    moe_shared_expert_gate: bool = Flag(
        default=False,
        help="Scale the shared experts' output with a learned gate.")
    moe_shared_expert_overlap: bool = Flag(
        default=False,
        help="Overlap shared-expert computation with the token dispatch communication.")
    use_grouped_gemm_for_shared_expert: bool = Flag(
        default=False,
        help="Run the shared experts through the grouped GEMM kernel as well.")
    moe_shared_expert_glu_interleave_size: Optional[int] = Flag(
        default=None,
        help="Interleave size of the shared experts' GLU weights.")

    # -- router ------------------------------------------------------------------------
    moe_router_load_balancing_type: Union[str, list] = Flag(
        default="aux_loss",
        type=str, nargs="+", choices=LOAD_BALANCING_TYPES,
        help="Load-balancing strategy of the router, one per loss when several are "
             "combined.")
    moe_aux_loss_coeff: Union[float, list] = Flag(
        default=0.0,
        type=float, nargs="+",
        help="Weight of the auxiliary load-balancing loss, one per load-balancing "
             "type.")
    moe_router_topk: int = Flag(default=2, help="Number of experts each token is routed to.")
    moe_router_num_groups: Optional[int] = Flag(
        default=None,
        help="Number of expert groups for group-limited routing.")
    moe_router_group_topk: Optional[int] = Flag(
        default=None,
        help="Number of expert groups each token may be routed to.")
    moe_router_pre_softmax: bool = Flag(
        default=False,
        help="Apply the softmax before picking the top-k experts.")
    moe_router_topk_scaling_factor: Optional[float] = Flag(
        default=None,
        help="Scale applied to the routing weights of the chosen experts.")
    moe_router_score_function: str = Flag(
        default="softmax",
        choices=("softmax", "sigmoid", "sqrtsoftplus"),
        help="Function turning router logits into expert scores.")
    moe_router_dtype: Optional[str] = Flag(
        default=None,
        choices=("fp32", "fp64"),
        help="Precision of the router computation; unset uses the model's dtype.")
    moe_router_enable_expert_bias: bool = Flag(
        default=False,
        help="Add a per-expert bias updated for auxiliary-loss-free load balancing.")
    moe_router_bias_update_rate: float = Flag(
        default=1e-3,
        help="Step size of the expert-bias update.")
    moe_router_quantile_balancing_ema: float = Flag(
        default=0.0,
        help="Exponential moving average factor of quantile-balancing biases.")
    moe_router_quantile_balancing_estimation_scope: str = Flag(
        default="micro_batch",
        choices=("micro_batch", "global_batch"),
        help="Tokens used to estimate quantile-balancing biases: one micro-batch or the "
             "global batch.")
    moe_router_qb_num_bins: int = Flag(
        default=1000,
        help="Histogram bins per expert for global-batch quantile balancing.")
    moe_router_force_load_balancing: bool = Flag(
        default=False,
        help="Route tokens uniformly at random, for benchmarking balanced loads.")
    moe_router_force_biased: Optional[float] = Flag(
        default=None,
        help="Skew forced routing towards some experts by this amount (benchmarking).")
    moe_router_padding_for_quantization: bool = Flag(
        default=False,
        help="Pad the routing map so each expert's token count suits quantized GEMMs.")
    moe_router_padding_for_fp8: bool = Flag(
        default=False,
        help="Pad the routing map so each expert's token count suits FP8 GEMMs.")
    moe_router_fusion: bool = Flag(default=False, help="Use the fused router kernels.")
    moe_enable_routing_replay: bool = Flag(
        default=False,
        help="Record routing decisions so they can be replayed.")
    moe_z_loss_coeff: Optional[float] = Flag(
        default=None,
        help="Weight of the router z-loss; unset disables it.")
    moe_input_jitter_eps: Optional[float] = Flag(
        default=None,
        help="Multiplicative noise added to router inputs during training.")

    # -- token dispatch ----------------------------------------------------------------
    moe_token_dispatcher_type: str = Flag(
        default="allgather",
        choices=("allgather", "alltoall", "flex"),
        help="How tokens are exchanged between expert-parallel ranks.")
    moe_enable_deepep: bool = Flag(
        default=False,
        help="Use DeepEP for the flex dispatcher (older spelling of "
             "--moe-flex-dispatcher-backend deepep).")
    moe_flex_dispatcher_backend: str = Flag(
        default="deepep",
        choices=("deepep", "hybridep", "ncclep"),
        help="Communication library behind the flex token dispatcher.")
    moe_flex_dispatcher_num_sms: Optional[int] = Flag(
        default=None,
        help="Number of SMs the flex dispatcher's kernels may use.")
    moe_deepep_num_sms: Optional[int] = Flag(
        default=None,
        help="Number of SMs DeepEP kernels may use.")
    moe_hybridep_num_sms: Optional[int] = Flag(
        default=None,
        help="Number of SMs HybridEP kernels may use.")
    moe_hybridep_num_blocks_permute: Optional[int] = Flag(
        default=None,
        help="Thread blocks HybridEP uses for the permute kernel.")
    moe_hybridep_num_blocks_unpermute: Optional[int] = Flag(
        default=None,
        help="Thread blocks HybridEP uses for the unpermute kernel.")
    moe_hybridep_num_sms_preprocessing: int = Flag(
        default=108,
        help="Number of SMs HybridEP uses for preprocessing.")
    moe_permute_fusion_into_hybridep: bool = Flag(
        default=False,
        help="Fuse token permutation into the HybridEP dispatch kernels.")
    moe_hybridep_pad_uneven_dispatch_inputs: bool = Flag(
        default=False,
        help="Pad uneven per-rank inputs before a HybridEP dispatch.")
    moe_ncclep_zero_copy: bool = Flag(
        default=False,
        help="Let the NCCL EP backend dispatch without intermediate copies.")
    moe_dispatch_fwd_dtype: str = Flag(
        default="bf16",
        choices=("bf16", "mxfp8"),
        help="Data type of tokens sent in the forward dispatch.")
    moe_combine_bwd_dtype: str = Flag(
        default="bf16",
        choices=("bf16", "mxfp8"),
        help="Data type of gradients sent in the backward combine.")
    moe_permute_fusion: bool = Flag(
        default=False,
        help="Use the fused token permute/unpermute kernels.")
    moe_expert_capacity_factor: Optional[float] = Flag(
        default=None,
        help="Tokens each expert accepts, as a multiple of the even share; unset means "
             "no token dropping.")
    moe_expert_rank_capacity_factor: Optional[float] = Flag(
        default=None,
        help="Tokens each expert-parallel rank accepts, as a multiple of the even "
             "share.")
    moe_pad_expert_input_to_capacity: bool = Flag(
        default=False,
        help="Pad each expert's input up to its capacity.")
    moe_pad_experts_for_cuda_graph_inference: bool = Flag(
        default=False,
        help="Pad expert inputs to fixed sizes so inference can be CUDA-graphed.")
    moe_token_drop_policy: str = Flag(
        default="probs",
        choices=("probs", "position"),
        help="Which tokens an over-capacity expert drops: lowest routing probability or "
             "latest position.")
    moe_apply_probs_on_input: bool = Flag(
        default=False,
        help="Multiply routing probabilities into expert inputs instead of outputs.")

    # -- communication overlap ---------------------------------------------------------
    overlap_moe_expert_parallel_comm: bool = Flag(
        default=False,
        help="Overlap expert-parallel all-to-all communication with computation.")
    overlap_dispatch_backward_with_experts_wgrad: bool = Flag(
        default=False,
        help="Overlap the dispatch backward with the experts' weight-gradient "
             "computation.")
    ep_overlap_early_attn_memory_release: bool = Flag(
        default=False,
        help="Free attention activations early when overlapping expert-parallel "
             "communication.")

    # -- expert kernels and memory -----------------------------------------------------
    moe_grouped_gemm: bool = Flag(
        default=False,
        help="Compute all local experts with one grouped GEMM (needs compute capability "
             "8.0 or newer).")
    use_grouped_gemm_for_dense_mlp: bool = Flag(
        default=False,
        help="Run dense MLP layers through the grouped GEMM kernel too.")
    moe_use_grouped_tensor: bool = Flag(
        default=False,
        help="Store expert weights as Transformer Engine grouped tensors.")
    moe_single_grouped_weight: bool = Flag(
        default=False,
        help="Keep all local experts' weights in one grouped parameter.")
    moe_single_grouped_bias: bool = Flag(
        default=False,
        help="Keep all local experts' biases in one grouped parameter.")
    moe_mlp_glu_interleave_size: Optional[int] = Flag(
        default=None,
        help="Interleave size of the experts' GLU weights.")
    moe_layer_recompute: bool = Flag(
        default=False,
        help="Recompute MoE layers in the backward pass to save memory.")
    moe_per_layer_logging: bool = Flag(
        default=False,
        help="Log MoE load-balancing statistics for every layer.")
    moe_megakernel_backend_config: Optional[Any] = Flag(
        default=None,
        type=json_value, metavar="JSON",
        help="Backend-specific options of the MoE megakernel, as a JSON object.")

    # -- paged stash -------------------------------------------------------------------
    moe_paged_stash: bool = Flag(default=False, help="Stash expert activations in paged buffers.")
    moe_paged_stash_page_size: int = Flag(
        default=64,
        help="Page size, in tokens, of the paged stash.")
    moe_paged_stash_buffer_size_factor_cuda: float = Flag(
        default=1.1,
        help="Size of the GPU stash buffer relative to the expected activations.")
    moe_paged_stash_buffer_size_factor_cpu: float = Flag(
        default=0.0,
        help="Size of the host stash buffer relative to the expected activations.")

    # -- upcycling ---------------------------------------------------------------------
    moe_use_upcycling: bool = Flag(
        default=False,
        help="Turn a dense checkpoint into an MoE model and save it to --save.")
    moe_upcycling_granularity: int = Flag(
        default=1,
        help="How many times smaller each expert's hidden size is than the dense FFN's "
             "(1 means plain upcycling).")

    # -- routing traces ----------------------------------------------------------------
    moe_routing_trace_path: Optional[str] = Flag(
        default=None,
        help="Directory to write routing traces to; unset disables tracing.")
    moe_routing_trace_max_training_iters: Optional[int] = Flag(
        default=None,
        help="Stop tracing routing after this many training iterations.")
    moe_routing_trace_capture_logits: bool = Flag(
        default=False,
        help="Include router logits in routing traces.")
    moe_routing_trace_capture_hidden_states: bool = Flag(
        default=False,
        help="Include router input hidden states in routing traces.")
    moe_routing_trace_dump_weights: bool = Flag(
        default=False,
        help="Write router weights next to routing traces.")


__all__ = ["LOAD_BALANCING_TYPES", "MoeOptions", "json_value", "moe_freq_type"]
