"""Every mixture-of-experts setting, as one options dataclass.

Option strings, types, defaults, choices and nargs follow Megatron-LM's parser; the
help texts are this plugin's own.
"""


import json
from typing import Any, Optional, Union

from typing_extensions import Annotated

from megaplug import Flag, PatternError, options, parse_pattern

#: Load-balancing strategies the router understands.
LOAD_BALANCING_TYPES = (
    "aux_loss",
    "seq_aux_loss",
    "global_aux_loss",
    "sinkhorn",
    "quantile_balancing",
    "none",
)


def moe_freq_type(text: Union[str, int]) -> Union[int, list]:
    """Parse ``--moe-layer-freq``: ``N`` (one MoE layer every N layers) or a 0/1 list pattern.

    A value containing ``[`` is a list expression such as ``([1]*3+[0]*1)*3``; anything
    else must be an integer. Raises ``ValueError`` with a readable message otherwise.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if isinstance(text, list):
        return text
    if "[" in text:
        try:
            value = parse_pattern(text)
        except PatternError as exc:
            raise ValueError(str(exc)) from None
        if not isinstance(value, list):
            raise ValueError(f"{text!r} does not evaluate to a list of 0/1 layer flags")
        return value
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"expected an integer or a list pattern such as '([1]*3+[0]*1)*3', got {text!r}"
        ) from None


def json_value(text: str) -> Any:
    """Parse a JSON document (``--moe-megakernel-backend-config``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at position {exc.pos}") from None


json_value.__name__ = "loads"


@options
class MoeOptions:
    """Mixture-of-experts settings: experts, routing, dispatch, kernels, tracing."""

    # -- experts and expert parallelism ----------------------------------------------
    num_experts: Annotated[Optional[int], Flag(
        help="Number of experts per MoE layer; unset or 0 means a dense model.")] = None
    moe_layer_freq: Annotated[Union[int, list], Flag(
        type=moe_freq_type,
        help="Which layers are MoE: N for one in every N layers, or a 0/1 list pattern "
             "such as '([1]*3+[0]*1)*3'.")] = 1
    moe_ffn_hidden_size: Annotated[Optional[int], Flag(
        help="Hidden size of each expert's MLP; defaults to --ffn-hidden-size.")] = None
    expert_model_parallel_size: Annotated[int, Flag(
        help="Number of ranks the experts are distributed over (expert parallelism).")] = 1
    expert_tensor_parallel_size: Annotated[Optional[int], Flag(
        help="Tensor-parallel degree inside each expert; defaults to "
             "--tensor-model-parallel-size.")] = None
    moe_latent_size: Annotated[Optional[int], Flag(
        help="Project tokens to this latent dimension before the experts (MoE latent "
             "projections).")] = None

    # -- shared experts --------------------------------------------------------------
    moe_shared_expert_intermediate_size: Annotated[Optional[int], Flag(
        help="Total hidden size of the shared experts; unset means no shared expert.")] = None
    moe_shared_expert_gate: Annotated[bool, Flag(
        help="Scale the shared experts' output with a learned gate.")] = False
    moe_shared_expert_overlap: Annotated[bool, Flag(
        help="Overlap shared-expert computation with the token dispatch communication.")] = False
    use_grouped_gemm_for_shared_expert: Annotated[bool, Flag(
        help="Run the shared experts through the grouped GEMM kernel as well.")] = False
    moe_shared_expert_glu_interleave_size: Annotated[Optional[int], Flag(
        help="Interleave size of the shared experts' GLU weights.")] = None

    # -- router ------------------------------------------------------------------------
    moe_router_load_balancing_type: Annotated[Union[str, list], Flag(
        type=str, nargs="+", choices=LOAD_BALANCING_TYPES,
        help="Load-balancing strategy of the router, one per loss when several are "
             "combined.")] = "aux_loss"
    moe_aux_loss_coeff: Annotated[Union[float, list], Flag(
        type=float, nargs="+",
        help="Weight of the auxiliary load-balancing loss, one per load-balancing "
             "type.")] = 0.0
    moe_router_topk: Annotated[int, Flag(
        help="Number of experts each token is routed to.")] = 2
    moe_router_num_groups: Annotated[Optional[int], Flag(
        help="Number of expert groups for group-limited routing.")] = None
    moe_router_group_topk: Annotated[Optional[int], Flag(
        help="Number of expert groups each token may be routed to.")] = None
    moe_router_pre_softmax: Annotated[bool, Flag(
        help="Apply the softmax before picking the top-k experts.")] = False
    moe_router_topk_scaling_factor: Annotated[Optional[float], Flag(
        help="Scale applied to the routing weights of the chosen experts.")] = None
    moe_router_score_function: Annotated[str, Flag(
        choices=("softmax", "sigmoid", "sqrtsoftplus"),
        help="Function turning router logits into expert scores.")] = "softmax"
    moe_router_dtype: Annotated[Optional[str], Flag(
        choices=("fp32", "fp64"),
        help="Precision of the router computation; unset uses the model's dtype.")] = None
    moe_router_enable_expert_bias: Annotated[bool, Flag(
        help="Add a per-expert bias updated for auxiliary-loss-free load balancing.")] = False
    moe_router_bias_update_rate: Annotated[float, Flag(
        help="Step size of the expert-bias update.")] = 1e-3
    moe_router_quantile_balancing_ema: Annotated[float, Flag(
        help="Exponential moving average factor of quantile-balancing biases.")] = 0.0
    moe_router_quantile_balancing_estimation_scope: Annotated[str, Flag(
        choices=("micro_batch", "global_batch"),
        help="Tokens used to estimate quantile-balancing biases: one micro-batch or the "
             "global batch.")] = "micro_batch"
    moe_router_qb_num_bins: Annotated[int, Flag(
        help="Histogram bins per expert for global-batch quantile balancing.")] = 1000
    moe_router_force_load_balancing: Annotated[bool, Flag(
        help="Route tokens uniformly at random, for benchmarking balanced loads.")] = False
    moe_router_force_biased: Annotated[Optional[float], Flag(
        help="Skew forced routing towards some experts by this amount (benchmarking).")] = None
    moe_router_padding_for_quantization: Annotated[bool, Flag(
        help="Pad the routing map so each expert's token count suits quantized GEMMs.")] = False
    moe_router_padding_for_fp8: Annotated[bool, Flag(
        help="Pad the routing map so each expert's token count suits FP8 GEMMs.")] = False
    moe_router_fusion: Annotated[bool, Flag(
        help="Use the fused router kernels.")] = False
    moe_enable_routing_replay: Annotated[bool, Flag(
        help="Record routing decisions so they can be replayed.")] = False
    moe_z_loss_coeff: Annotated[Optional[float], Flag(
        help="Weight of the router z-loss; unset disables it.")] = None
    moe_input_jitter_eps: Annotated[Optional[float], Flag(
        help="Multiplicative noise added to router inputs during training.")] = None

    # -- token dispatch ----------------------------------------------------------------
    moe_token_dispatcher_type: Annotated[str, Flag(
        choices=("allgather", "alltoall", "flex"),
        help="How tokens are exchanged between expert-parallel ranks.")] = "allgather"
    moe_enable_deepep: Annotated[bool, Flag(
        help="Use DeepEP for the flex dispatcher (older spelling of "
             "--moe-flex-dispatcher-backend deepep).")] = False
    moe_flex_dispatcher_backend: Annotated[str, Flag(
        choices=("deepep", "hybridep", "ncclep"),
        help="Communication library behind the flex token dispatcher.")] = "deepep"
    moe_flex_dispatcher_num_sms: Annotated[Optional[int], Flag(
        help="Number of SMs the flex dispatcher's kernels may use.")] = None
    moe_deepep_num_sms: Annotated[Optional[int], Flag(
        help="Number of SMs DeepEP kernels may use.")] = None
    moe_hybridep_num_sms: Annotated[Optional[int], Flag(
        help="Number of SMs HybridEP kernels may use.")] = None
    moe_hybridep_num_blocks_permute: Annotated[Optional[int], Flag(
        help="Thread blocks HybridEP uses for the permute kernel.")] = None
    moe_hybridep_num_blocks_unpermute: Annotated[Optional[int], Flag(
        help="Thread blocks HybridEP uses for the unpermute kernel.")] = None
    moe_hybridep_num_sms_preprocessing: Annotated[int, Flag(
        help="Number of SMs HybridEP uses for preprocessing.")] = 108
    moe_permute_fusion_into_hybridep: Annotated[bool, Flag(
        help="Fuse token permutation into the HybridEP dispatch kernels.")] = False
    moe_hybridep_pad_uneven_dispatch_inputs: Annotated[bool, Flag(
        help="Pad uneven per-rank inputs before a HybridEP dispatch.")] = False
    moe_ncclep_zero_copy: Annotated[bool, Flag(
        help="Let the NCCL EP backend dispatch without intermediate copies.")] = False
    moe_dispatch_fwd_dtype: Annotated[str, Flag(
        choices=("bf16", "mxfp8"),
        help="Data type of tokens sent in the forward dispatch.")] = "bf16"
    moe_combine_bwd_dtype: Annotated[str, Flag(
        choices=("bf16", "mxfp8"),
        help="Data type of gradients sent in the backward combine.")] = "bf16"
    moe_permute_fusion: Annotated[bool, Flag(
        help="Use the fused token permute/unpermute kernels.")] = False
    moe_expert_capacity_factor: Annotated[Optional[float], Flag(
        help="Tokens each expert accepts, as a multiple of the even share; unset means "
             "no token dropping.")] = None
    moe_expert_rank_capacity_factor: Annotated[Optional[float], Flag(
        help="Tokens each expert-parallel rank accepts, as a multiple of the even "
             "share.")] = None
    moe_pad_expert_input_to_capacity: Annotated[bool, Flag(
        help="Pad each expert's input up to its capacity.")] = False
    moe_pad_experts_for_cuda_graph_inference: Annotated[bool, Flag(
        help="Pad expert inputs to fixed sizes so inference can be CUDA-graphed.")] = False
    moe_token_drop_policy: Annotated[str, Flag(
        choices=("probs", "position"),
        help="Which tokens an over-capacity expert drops: lowest routing probability or "
             "latest position.")] = "probs"
    moe_apply_probs_on_input: Annotated[bool, Flag(
        help="Multiply routing probabilities into expert inputs instead of outputs.")] = False

    # -- communication overlap ---------------------------------------------------------
    overlap_moe_expert_parallel_comm: Annotated[bool, Flag(
        help="Overlap expert-parallel all-to-all communication with computation.")] = False
    overlap_dispatch_backward_with_experts_wgrad: Annotated[bool, Flag(
        help="Overlap the dispatch backward with the experts' weight-gradient "
             "computation.")] = False
    ep_overlap_early_attn_memory_release: Annotated[bool, Flag(
        help="Free attention activations early when overlapping expert-parallel "
             "communication.")] = False

    # -- expert kernels and memory -----------------------------------------------------
    moe_grouped_gemm: Annotated[bool, Flag(
        help="Compute all local experts with one grouped GEMM (needs compute capability "
             "8.0 or newer).")] = False
    use_grouped_gemm_for_dense_mlp: Annotated[bool, Flag(
        help="Run dense MLP layers through the grouped GEMM kernel too.")] = False
    moe_use_grouped_tensor: Annotated[bool, Flag(
        help="Store expert weights as Transformer Engine grouped tensors.")] = False
    moe_single_grouped_weight: Annotated[bool, Flag(
        help="Keep all local experts' weights in one grouped parameter.")] = False
    moe_single_grouped_bias: Annotated[bool, Flag(
        help="Keep all local experts' biases in one grouped parameter.")] = False
    moe_mlp_glu_interleave_size: Annotated[Optional[int], Flag(
        help="Interleave size of the experts' GLU weights.")] = None
    moe_layer_recompute: Annotated[bool, Flag(
        help="Recompute MoE layers in the backward pass to save memory.")] = False
    moe_per_layer_logging: Annotated[bool, Flag(
        help="Log MoE load-balancing statistics for every layer.")] = False
    moe_megakernel_backend_config: Annotated[Optional[Any], Flag(
        type=json_value, metavar="JSON",
        help="Backend-specific options of the MoE megakernel, as a JSON object.")] = None

    # -- paged stash -------------------------------------------------------------------
    moe_paged_stash: Annotated[bool, Flag(
        help="Stash expert activations in paged buffers.")] = False
    moe_paged_stash_page_size: Annotated[int, Flag(
        help="Page size, in tokens, of the paged stash.")] = 64
    moe_paged_stash_buffer_size_factor_cuda: Annotated[float, Flag(
        help="Size of the GPU stash buffer relative to the expected activations.")] = 1.1
    moe_paged_stash_buffer_size_factor_cpu: Annotated[float, Flag(
        help="Size of the host stash buffer relative to the expected activations.")] = 0.0

    # -- upcycling ---------------------------------------------------------------------
    moe_use_upcycling: Annotated[bool, Flag(
        help="Turn a dense checkpoint into an MoE model and save it to --save.")] = False
    moe_upcycling_granularity: Annotated[int, Flag(
        help="How many times smaller each expert's hidden size is than the dense FFN's "
             "(1 means plain upcycling).")] = 1

    # -- routing traces ----------------------------------------------------------------
    moe_routing_trace_path: Annotated[Optional[str], Flag(
        help="Directory to write routing traces to; unset disables tracing.")] = None
    moe_routing_trace_max_training_iters: Annotated[Optional[int], Flag(
        help="Stop tracing routing after this many training iterations.")] = None
    moe_routing_trace_capture_logits: Annotated[bool, Flag(
        help="Include router logits in routing traces.")] = False
    moe_routing_trace_capture_hidden_states: Annotated[bool, Flag(
        help="Include router input hidden states in routing traces.")] = False
    moe_routing_trace_dump_weights: Annotated[bool, Flag(
        help="Write router weights next to routing traces.")] = False


__all__ = ["LOAD_BALANCING_TYPES", "MoeOptions", "json_value", "moe_freq_type"]
