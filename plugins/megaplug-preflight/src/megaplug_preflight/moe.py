"""Mixture of experts: expert counts, token dispatchers, capacity, router options, shared experts.

Megatron makes most of these checks whether or not the model has experts (a router option
on a dense model is refused too), and so does pre-flight. Its refusal of the allgather
dispatcher with variable sequence lengths is not ported: the Megatron revision whose flags
megaplug carries always sets ``variable_seq_lengths = False`` in validate_args.
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown, te_shortfall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Load-balancing types that work with a capacity factor (token dropping).
CAPACITY_LOAD_BALANCING = ("aux_loss", "seq_aux_loss", "global_aux_loss", "none")

#: Transformer Engine versions for single grouped weights, MoE FP8 and FP8 grouped GEMM,
#: and the fused permutation kernels.
SINGLE_GROUPED_MIN_TE = "2.14.0"
MOE_FP8_MIN_TE = "1.7.0.dev0"
FP8_GROUPED_GEMM_MIN_TE = "1.11.0"
PERMUTE_FUSION_MIN_TE = "2.1.0"

#: Score functions that the auxiliary-loss-free expert bias works with.
EXPERT_BIAS_SCORE_FUNCTIONS = ("sigmoid", "sqrtsoftplus")


def expert_count_positive(config: Draft) -> None:
    """A negative expert count is not a model."""
    count = view.experts(config)
    if count is not None and count <= 0:
        reject(config, f"{shown(config, 'num_experts')} must be positive",
               flags=("num_experts",), hint="give a positive number of experts, or 0 for dense")


def expert_ffn_size_needs_experts(config: Draft) -> None:
    """``--moe-ffn-hidden-size`` sizes experts; a dense model has none, unless some layers
    are MoE by ``--moe-layer-freq`` (then it is ignored for the dense ones)."""
    if view.experts(config) is not None or config.get("moe_ffn_hidden_size") is None:
        return
    freq = config.get("moe_layer_freq", 1)
    mixed = (isinstance(freq, list) and 0 in freq) or (
        isinstance(freq, int) and not isinstance(freq, bool) and freq > 1)
    if not mixed:
        reject(config, f"{shown(config, 'moe_ffn_hidden_size')} is set but --num-experts is not",
               flags=("moe_ffn_hidden_size", "num_experts"),
               hint="set --num-experts, or drop --moe-ffn-hidden-size")


def grouped_tensor_needs_grouped_gemm(config: Draft) -> None:
    """Grouped tensors hold the weights of the grouped GEMM."""
    if config.get("moe_use_grouped_tensor") and not config.get("moe_grouped_gemm"):
        reject(config, "--moe-use-grouped-tensor needs --moe-grouped-gemm",
               flags=("moe_use_grouped_tensor", "moe_grouped_gemm"),
               hint="add --moe-grouped-gemm")


def single_grouped_parameters_need_grouped_gemm(config: Draft) -> None:
    """Single grouped weights and biases live in the grouped GEMM, with a recent TE."""
    names = [d for d in ("moe_single_grouped_weight", "moe_single_grouped_bias")
             if config.get(d)]
    if not names:
        return
    spelled = " and ".join(config.spelling(d) for d in names)
    if not config.get("moe_grouped_gemm"):
        reject(config, f"{spelled} need --moe-grouped-gemm",
               flags=(*names, "moe_grouped_gemm"), hint="add --moe-grouped-gemm")
    problem = te_shortfall(config, SINGLE_GROUPED_MIN_TE)
    if problem:
        reject(config, f"{spelled} {problem}",
               flags=tuple(names), hint="upgrade Transformer Engine, or drop these flags")
    if not view.uses_grouped_tensor(config):
        reject(config, f"{spelled} need grouped tensors",
               flags=(*names, "moe_use_grouped_tensor"),
               hint="add --moe-use-grouped-tensor (or --use-transformer-engine-op-fuser)")


def single_grouped_weight_precision(config: Draft) -> None:
    """Single grouped weights keep high-precision, MXFP8 or NVFP4 primary weights."""
    if not config.get("moe_single_grouped_weight"):
        return
    fp8_recipe, fp4_recipe = config.get("fp8_recipe"), config.get("fp4_recipe")
    if (view.fp8_on(config) and fp8_recipe != "mxfp8") or (
            view.fp4_on(config) and fp4_recipe != "nvfp4"):
        reject(config, "--moe-single-grouped-weight supports only high-precision weights, "
                       "--fp8-recipe mxfp8 or --fp4-recipe nvfp4",
               flags=("moe_single_grouped_weight", "fp8_recipe", "fp4_recipe"),
               hint="use the mxfp8 / nvfp4 recipe, or drop --moe-single-grouped-weight")
    if view.fp4_on(config) and not config.get("fp4_param_gather"):
        reject(config, "--moe-single-grouped-weight with FP4 needs --fp4-param-gather",
               flags=("moe_single_grouped_weight", "fp4_param_gather"),
               hint="add --fp4-param-gather")


def single_grouped_bias_needs_bias(config: Draft) -> None:
    if config.get("moe_single_grouped_bias") and not config.get("add_bias_linear"):
        reject(config, "--moe-single-grouped-bias needs linear biases, and "
                       "--disable-bias-linear removes them",
               flags=("moe_single_grouped_bias", "add_bias_linear"),
               hint="drop --disable-bias-linear, or --moe-single-grouped-bias")


def deepep_needs_flex_dispatcher(config: Draft) -> None:
    """``--moe-enable-deepep`` is a flex-dispatcher backend, and the only one chosen."""
    if not config.get("moe_enable_deepep"):
        return
    if config.get("moe_token_dispatcher_type", "allgather") != "flex":
        reject(config, f"--moe-enable-deepep needs --moe-token-dispatcher-type flex, got "
                       f"{config.get('moe_token_dispatcher_type', 'allgather')}",
               flags=("moe_enable_deepep", "moe_token_dispatcher_type"),
               hint="use --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend deepep")
    if config.get("moe_flex_dispatcher_backend") == "hybridep":
        reject(config, "--moe-enable-deepep and --moe-flex-dispatcher-backend hybridep choose "
                       "two backends",
               flags=("moe_enable_deepep", "moe_flex_dispatcher_backend"),
               hint="drop --moe-enable-deepep (deprecated), keep the backend flag")


def deepep_without_capacity_padding(config: Draft) -> None:
    """DeepEP dispatches dropless token counts; it cannot pad experts to capacity."""
    if (config.get("moe_token_dispatcher_type") == "flex"
            and config.get("moe_pad_expert_input_to_capacity")
            and view.flex_backend(config) == "deepep"):
        reject(config, "--moe-pad-expert-input-to-capacity does not work with the flex "
                       "dispatcher's DeepEP backend",
               flags=("moe_pad_expert_input_to_capacity", "moe_flex_dispatcher_backend"),
               hint="use --moe-flex-dispatcher-backend hybridep, or drop the padding")


def ncclep_needs_flex_dispatcher(config: Draft) -> None:
    """NCCL-EP is a backend of the flex dispatcher, without plain grouped tensors."""
    if view.flex_backend(config) != "ncclep":
        return
    dispatcher = config.get("moe_token_dispatcher_type", "allgather")
    if dispatcher != "flex":
        reject(config, f"--moe-flex-dispatcher-backend ncclep needs --moe-token-dispatcher-type "
                       f"flex, got {dispatcher}",
               flags=("moe_flex_dispatcher_backend", "moe_token_dispatcher_type"),
               hint="use --moe-token-dispatcher-type flex, or another backend")
    if view.uses_grouped_tensor(config) and not config.get("use_transformer_engine_op_fuser"):
        reject(config, "--moe-use-grouped-tensor with the NCCL-EP backend needs "
                       "--use-transformer-engine-op-fuser",
               flags=("moe_use_grouped_tensor", "moe_flex_dispatcher_backend",
                      "use_transformer_engine_op_fuser"),
               hint="add --use-transformer-engine-op-fuser, or use another dispatcher")


def quantized_dispatch_needs_ncclep(config: Draft) -> None:
    """MXFP8 dispatch and combine are NCCL-EP features of the fused grouped GEMM."""
    quantized = [d for d in ("moe_dispatch_fwd_dtype", "moe_combine_bwd_dtype")
                 if config.get(d, "bf16") != "bf16"]
    if not quantized:
        return
    spelled = " / ".join(shown(config, d) for d in quantized)
    if (config.get("moe_token_dispatcher_type") != "flex"
            or view.flex_backend(config) != "ncclep"):
        reject(config, f"{spelled} needs the flex dispatcher's ncclep backend",
               flags=(*quantized, "moe_token_dispatcher_type", "moe_flex_dispatcher_backend"),
               hint="use --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep")
    if not (config.get("use_transformer_engine_op_fuser") and config.get("moe_grouped_gemm")):
        reject(config, f"{spelled} needs both --use-transformer-engine-op-fuser and "
                       "--moe-grouped-gemm",
               flags=(*quantized, "use_transformer_engine_op_fuser", "moe_grouped_gemm"),
               hint="add both flags, or dispatch in bf16")


#: The first Megatron release line whose configuration merges the two SM counts into one
#: (``moe_flex_dispatcher_num_sms``); before it they are separate settings (0.16: 20 and 16).
MERGED_SM_COUNTS_RELEASE = "0.19.0"


def deprecated_sm_counts_agree(config: Draft) -> None:
    """The two deprecated SM-count flags stand for one setting; they must not disagree."""
    if (config.get("moe_flex_dispatcher_num_sms") is not None
            or config.env.megatron.before(MERGED_SM_COUNTS_RELEASE)):
        return
    deepep, hybridep = config.get("moe_deepep_num_sms"), config.get("moe_hybridep_num_sms")
    if deepep is not None and hybridep is not None and deepep != hybridep:
        reject(config, f"{shown(config, 'moe_deepep_num_sms')} and "
                       f"{shown(config, 'moe_hybridep_num_sms')} disagree",
               flags=("moe_deepep_num_sms", "moe_hybridep_num_sms"),
               hint="set --moe-flex-dispatcher-num-sms instead of both")


def shared_expert_size_positive(config: Draft) -> None:
    size = config.get("moe_shared_expert_intermediate_size")
    if size is not None and size <= 0:
        reject(config, f"{shown(config, 'moe_shared_expert_intermediate_size')} must be "
                       "positive (shared experts x each one's FFN size)",
               flags=("moe_shared_expert_intermediate_size",),
               hint="give a positive size, or leave it unset for no shared experts")


def shared_expert_overlap_needs_all_to_all(config: Draft) -> None:
    """Shared experts overlap the all-to-all (or flex) dispatch; allgather has none."""
    if (config.get("moe_shared_expert_intermediate_size") is not None
            and config.get("moe_shared_expert_overlap")
            and config.get("moe_token_dispatcher_type", "allgather") not in ("alltoall", "flex")):
        reject(config, "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall "
                       f"or flex, got {config.get('moe_token_dispatcher_type', 'allgather')}",
               flags=("moe_shared_expert_overlap", "moe_token_dispatcher_type"),
               hint="use the alltoall dispatcher, or drop --moe-shared-expert-overlap")


def aux_loss_coefficients_match_types(config: Draft) -> None:
    """Several load-balancing types take one auxiliary-loss coefficient each."""
    types = config.get("moe_router_load_balancing_type")
    if not isinstance(types, list):
        return
    coeffs = config.get("moe_aux_loss_coeff")
    if not isinstance(coeffs, list) or len(coeffs) != len(types):
        count = len(coeffs) if isinstance(coeffs, list) else 1
        reject(config, f"{len(types)} load-balancing types need {len(types)} "
                       f"--moe-aux-loss-coeff values, got {count}",
               flags=("moe_router_load_balancing_type", "moe_aux_loss_coeff"),
               hint="give one coefficient per load-balancing type")


def capacity_factor_load_balancing(config: Draft) -> None:
    """Token dropping works with the auxiliary-loss load balancers (or none)."""
    if config.get("moe_expert_capacity_factor") is None:
        return
    wrong = [t for t in view.load_balancing_types(config) if t not in CAPACITY_LOAD_BALANCING]
    if wrong:
        reject(config, f"--moe-expert-capacity-factor does not work with "
                       f"--moe-router-load-balancing-type {' '.join(wrong)}",
               flags=("moe_expert_capacity_factor", "moe_router_load_balancing_type"),
               hint="use aux_loss, seq_aux_loss, global_aux_loss or none, or drop the "
                    "capacity factor")


def capacity_padding_needs_capacity(config: Draft) -> None:
    if config.get("moe_pad_expert_input_to_capacity") and view.capacity_factor(config) is None:
        reject(config, "--moe-pad-expert-input-to-capacity needs a non-negative "
                       "--moe-expert-capacity-factor",
               flags=("moe_pad_expert_input_to_capacity", "moe_expert_capacity_factor"),
               hint="set --moe-expert-capacity-factor, or drop the padding")


def rank_capacity_needs_hybridep_or_ncclep(config: Draft) -> None:
    """A per-rank capacity is enforced by the HybridEP and NCCL-EP backends."""
    if config.get("moe_expert_rank_capacity_factor") is None:
        return
    backend = view.flex_backend(config)
    if backend not in ("hybridep", "ncclep"):
        reject(config, f"--moe-expert-rank-capacity-factor needs --moe-flex-dispatcher-backend "
                       f"hybridep or ncclep, got {backend}",
               flags=("moe_expert_rank_capacity_factor", "moe_flex_dispatcher_backend"),
               hint="choose the hybridep or ncclep backend")
    elif (backend == "hybridep" and not config.get("use_transformer_engine_op_fuser")
          and not view.uses_grouped_tensor(config)):
        reject(config, "--moe-expert-rank-capacity-factor with HybridEP needs "
                       "--use-transformer-engine-op-fuser or --moe-use-grouped-tensor",
               flags=("moe_expert_rank_capacity_factor", "use_transformer_engine_op_fuser"),
               hint="add --use-transformer-engine-op-fuser")


def expert_bias_needs_tensor_parallel_one(config: Draft) -> None:
    """Expert linear biases are only supported without expert tensor parallelism."""
    etp = config.get("expert_tensor_parallel_size") or config.get("tensor_model_parallel_size", 1)
    if view.experts(config) is not None and config.get("add_bias_linear") and etp != 1:
        reject(config, f"MoE layers with linear biases need expert tensor parallel size 1, got "
                       f"{etp}",
               flags=("add_bias_linear", "expert_tensor_parallel_size", "num_experts"),
               hint="add --disable-bias-linear, or --expert-tensor-parallel-size 1")


def router_expert_bias_score_function(config: Draft) -> None:
    """The auxiliary-loss-free expert bias is defined for sigmoid-like scores."""
    score = config.get("moe_router_score_function", "softmax")
    if config.get("moe_router_enable_expert_bias") and score not in EXPERT_BIAS_SCORE_FUNCTIONS:
        reject(config, f"--moe-router-enable-expert-bias needs --moe-router-score-function "
                       f"sigmoid or sqrtsoftplus, got {score}",
               flags=("moe_router_enable_expert_bias", "moe_router_score_function"),
               hint="use --moe-router-score-function sigmoid")


def moe_fp8_needs_recent_te(config: Draft) -> None:
    """FP8 experts (and FP8 grouped GEMM) need recent Transformer Engine versions."""
    if not view.experts(config) or not view.fp8_on(config):
        return
    problem = te_shortfall(config, MOE_FP8_MIN_TE)
    if problem:
        reject(config, f"MoE with FP8 {problem}", flags=("num_experts", "fp8"),
               hint="upgrade Transformer Engine")
    elif config.get("moe_grouped_gemm") and config.env.package_version(
            "transformer_engine") is not None:
        problem = config.env.requirement_problem("transformer_engine", FP8_GROUPED_GEMM_MIN_TE)
        if problem:
            reject(config, f"FP8 grouped GEMM {problem}", flags=("moe_grouped_gemm", "fp8"),
                   hint="upgrade Transformer Engine")


def router_padding_needs_quantization(config: Draft) -> None:
    """Routing-map padding aligns token counts for FP8/FP4 GEMMs, with an all-to-all style
    dispatcher."""
    if not view.padding_for_quantization(config):
        return
    dest = view.padding_for_quantization_dest(config)
    if not view.fp8_on(config) and not view.fp4_on(config):
        reject(config, f"{config.spelling(dest)} needs FP8 or FP4 training",
               flags=(dest, "fp8", "fp4"), hint="add --fp8-format or --fp4-format, or drop it")
    dispatcher = config.get("moe_token_dispatcher_type", "allgather")
    if dispatcher in ("allgather", "alltoall_seq"):
        reject(config, f"{config.spelling(dest)} does not work with "
                       f"--moe-token-dispatcher-type {dispatcher}",
               flags=(dest, "moe_token_dispatcher_type"),
               hint="use --moe-token-dispatcher-type alltoall or flex")


def top1_routing_needs_pre_softmax(config: Draft) -> None:
    """A softmax over one selected expert has zero gradient; take it before the top-k."""
    if (config.get("moe_router_topk", 2) == 1
            and config.get("moe_router_score_function", "softmax") == "softmax"
            and not config.get("moe_router_pre_softmax")
            and config.get("moe_router_load_balancing_type") != "sinkhorn"):
        reject(config, "--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax",
               flags=("moe_router_topk", "moe_router_pre_softmax"),
               hint="add --moe-router-pre-softmax (or route to 2 or more experts)")


def group_limited_routing(config: Draft) -> None:
    """Group-limited routing picks groups of experts: the groups must divide the experts."""
    group_topk = config.get("moe_router_group_topk")
    if not group_topk:
        return
    groups = config.get("moe_router_num_groups")
    if not groups:
        reject(config, "--moe-router-group-topk needs --moe-router-num-groups",
               flags=("moe_router_group_topk", "moe_router_num_groups"),
               hint="set --moe-router-num-groups")
        return
    count = view.experts(config)
    if count is None or count % groups:
        reject(config, f"{shown(config, 'num_experts', count)} is not a multiple of "
                       f"{shown(config, 'moe_router_num_groups')}",
               flags=("num_experts", "moe_router_num_groups"),
               hint="use a group count that divides the number of experts")
    if group_topk > groups:
        reject(config, f"{shown(config, 'moe_router_group_topk')} is more than "
                       f"{shown(config, 'moe_router_num_groups')}",
               flags=("moe_router_group_topk", "moe_router_num_groups"),
               hint="route to at most as many groups as there are")


def permute_fusion_kernels_available(config: Draft) -> None:
    """The fused permutation kernels come from Transformer Engine 2.1 or newer."""
    if not config.get("moe_permute_fusion"):
        return
    problem = te_shortfall(config, PERMUTE_FUSION_MIN_TE)
    if problem:
        reject(config, f"--moe-permute-fusion {problem}", flags=("moe_permute_fusion",),
               hint="drop --moe-permute-fusion, or install Transformer Engine >= 2.1")


CHECKS: tuple[Check, ...] = (
    expert_count_positive,
    expert_ffn_size_needs_experts,
    grouped_tensor_needs_grouped_gemm,
    single_grouped_parameters_need_grouped_gemm,
    single_grouped_weight_precision,
    single_grouped_bias_needs_bias,
    deepep_needs_flex_dispatcher,
    deepep_without_capacity_padding,
    ncclep_needs_flex_dispatcher,
    quantized_dispatch_needs_ncclep,
    deprecated_sm_counts_agree,
    shared_expert_size_positive,
    shared_expert_overlap_needs_all_to_all,
    aux_loss_coefficients_match_types,
    capacity_factor_load_balancing,
    capacity_padding_needs_capacity,
    rank_capacity_needs_hybridep_or_ncclep,
    expert_bias_needs_tensor_parallel_one,
    router_expert_bias_score_function,
    moe_fp8_needs_recent_te,
    router_padding_needs_quantization,
    top1_routing_needs_pre_softmax,
    group_limited_routing,
    permute_fusion_kernels_available,
)
