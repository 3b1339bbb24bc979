"""Raises of Megatron's forward, dispatch and optimizer-step code that the configuration and
the environment alone decide: what kills a job at its first iteration, after start-up.

Found by reading each release's module code (``scripts/first_step_raises.py`` lists every
``raise`` of the MoE layer, router, token dispatchers and experts, and of the optimizer step,
per release, with the verdict on each: decided by the configuration, or by data):

- ``MoELayer.forward`` (0.13-0.19): ``ValueError: During training, performance may degrade
  if MoE and tensor parallelism are enabled without also enabling sequence parallelism``.
- ``RouterGatingLinearFunction.forward`` (``moe_utils.py``, 0.13-0.16): reads
  ``te_general_gemm``, which only the Transformer Engine import defines: without Transformer
  Engine every MoE router dies with ``NameError`` at its first forward (0.17 sets the name
  to None when the import fails).
- ``forward_backward_pipelining_with_interleaving`` (every release): the micro-batch group
  of a virtual stage must lie in [PP, M], and M modulo it be 0 or at least PP.
- ``TopKRouter.sinkhorn_load_balancing`` (every release): no aux loss with Sinkhorn.
- ``MoELayer.preprocess`` (0.16.0 and later): latent projections exclude shared-expert
  overlap (from 0.18.0 only the NVLS inference dispatcher takes it).
- ``LanguageModule.compute_language_model_loss`` (0.13.0-0.18.0; 0.18.2 refuses the fusion in
  ``validate_args``): Transformer Engine's cross entropy fusion without Transformer Engine.
- ``SequentialMLP`` / ``TEGroupedMLP`` / ``GroupedMLP.forward`` (every release):
  ``--moe-apply-probs-on-input`` only with top-1 routing.
- ``DistributedDataParallel.__init__`` (every release): per-token loss excludes averaging
  in the collective -- after the model is built, before the first step.
- ``train`` (every release): a negative manual garbage-collection interval.
- ``TopKRouter.quantile_balancing`` (0.19.0 and later): no group-limited routing, no fused
  router.
- ``MultiTokenPredictionLayer._checkpointed_forward`` (0.14.0 and later): uniform full
  recompute of one layer per chunk.
- the optimizer builder (0.16.0 and later): Muon without fp16.
- ``_ParamAndGradBucketGroup.__init__`` (0.16.0 and later): FP32-accumulating
  reduce-scatter with one distributed-optimizer instance.
- ``DistributedDataParallel.__init__`` (every release): several optimizer instances need
  the distributed optimizer.
- ``num_floating_point_operations`` (0.13.0-0.15.3): MLA without grouped-query attention.
- ``MoEFlexTokenDispatcher.__init__`` (0.13.0-0.15.3): the flex dispatcher needs DeepEP
  (raised while the MoE layers are built, past the configuration).
- ``save_checkpoint``, at the first save: ``--async-save`` with the legacy ``torch`` format
  (every release); local non-persistent checkpoints with a fully reshardable distributed
  optimizer (0.15.0 and later).

The scanner's record (``tests/first_step_raises.json``) lists every other site it found
decided by the configuration, and the README says why those need no rule here.
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import TRANSFORMER_ENGINE, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Appended to these problems: the launch builds its model and dies later.
AT_FIRST_STEP = "Megatron {release} would raise this at the first training iteration"
#: ... or while it sets training up (data-parallel wrapping, the optimizer, the loop's start).
AT_SET_UP = "Megatron {release} would raise this after building the model, before training"
#: ... or when it first saves a checkpoint (at --save-interval, or when training ends).
AT_FIRST_SAVE = "Megatron {release} would raise this at its first checkpoint save"


def _release(config: Draft) -> str:
    return config.env.release_line("megatron_core")


def _trains(config: Draft) -> bool:
    return not config.get("skip_train") and bool(config.get("train_iters") or config.get(
        "train_samples"))


def moe_with_tensor_parallelism_needs_sequence_parallelism(config: Draft) -> None:
    """MoE with tensor parallelism trains only with sequence parallelism (every release).

    ``MoELayer.forward`` raises at the first training iteration otherwise."""
    tp = config.get("tensor_model_parallel_size") or 1
    if not view.experts(config) or tp <= 1 or config.get("sequence_parallel"):
        return
    if not _trains(config):
        return
    _refuse(config, f"MoE with {shown(config, 'tensor_model_parallel_size')} needs "
            "--sequence-parallel while training (ValueError: During training, performance may "
            "degrade if MoE and tensor parallelism are enabled without also enabling sequence "
            "parallelism)",
            flags=("num_experts", "tensor_model_parallel_size", "sequence_parallel"),
            hint="add --sequence-parallel")


def moe_router_needs_transformer_engine_before_0_17(config: Draft) -> None:
    """Megatron 0.13.0-0.16.1's MoE router needs Transformer Engine to run at all.

    Its gate names ``te_general_gemm``, defined only when Transformer Engine imports:
    without it the first forward raises ``NameError``."""
    if not view.experts(config) or config.env.megatron.at_least("0.17.0"):
        return
    env = config.env
    if env.package_version(TRANSFORMER_ENGINE) is not None or not env.knows_package(
            TRANSFORMER_ENGINE):
        return  # installed, or unknown on this machine (a login node): not judged
    _refuse(config, "the MoE router of this release needs Transformer Engine, not installed "
            "(NameError: name 'te_general_gemm' is not defined, in its gating)",
            flags=("num_experts",),
            hint="install Transformer Engine, or use Megatron 0.17.0 or later for MoE without it")


def _refuse(config: Draft, megatron_says: str, *, flags: tuple[str, ...], hint: str,
            when: str = AT_FIRST_STEP) -> None:
    """Report one first-step problem: what is wrong, Megatron's own words, the release."""
    config.error(f"{megatron_says}; {when.format(release=_release(config))}", flags=flags,
                 hint=hint)


def _micro_batches(config: Draft) -> int | None:
    """Micro-batches per step and data-parallel rank (Megatron's ``get_num_microbatches``),
    or None where the first step's count is not this one (batch-size ramp-up)."""
    if config.get("rampup_batch_size"):
        return None
    per_step = (config.get("micro_batch_size") or 1) * (config.get("data_parallel_size") or 1)
    batch = config.get("global_batch_size") or per_step
    return batch // per_step if batch % per_step == 0 else None  # else validate_args refuses


def interleaved_schedule_micro_batch_groups(config: Draft) -> None:
    """The interleaved schedule groups N micro-batches per virtual stage (every release).

    ``forward_backward_pipelining_with_interleaving`` needs PP <= N <= M (N defaults to PP),
    and M % N to be 0 or at least PP, else it raises at the first iteration."""
    pp = config.get("pipeline_model_parallel_size") or 1
    micro = _micro_batches(config)
    if pp <= 1 or config.get("virtual_pipeline_model_parallel_size") is None or micro is None \
            or not _trains(config):
        return
    group = config.get("microbatch_group_size_per_vp_stage") or pp
    flags = ("global_batch_size", "pipeline_model_parallel_size",
             "microbatch_group_size_per_vp_stage")
    least = max(group, pp)
    batch = least * (config.get("micro_batch_size") or 1) * (config.get("data_parallel_size") or 1)
    hint = (f"use a global batch of at least {least} micro-batches per data-parallel rank "
            f"(--global-batch-size {batch}), or no virtual pipeline stages")
    if group > micro or group < pp:
        _refuse(config, f"the interleaved schedule's {group} micro-batches per virtual stage "
                f"must lie between the pipeline size and the {micro} micro-batches of a step "
                "(ValueError: The number of contiguous micro-batches in a virtual pipeline "
                f"stageshould range in [PP={pp} , M={micro}])", flags=flags, hint=hint)
    elif 0 < micro % group < pp:
        _refuse(config, f"the interleaved schedule's last group of micro-batches ({micro} % "
                f"{group} = {micro % group}) is smaller than the pipeline size {pp} "
                "(RuntimeError: The remainder of M (the total micro-batches) divided by N "
                "(number of contiguous micro-batches in a virtual pipeline stage) should be 0, "
                "or larger than or equal to the pipeline-parallel size, ...)", flags=flags,
                hint=f"use a global batch that is a multiple of {group} micro-batches per "
                     "data-parallel rank")


def sinkhorn_routing_without_aux_loss(config: Draft) -> None:
    """Sinkhorn routing takes no auxiliary loss (every release).

    ``TopKRouter``'s Sinkhorn balancing asserts ``moe_aux_loss_coeff == 0`` at the first
    forward."""
    if not view.experts(config) or config.get("moe_router_load_balancing_type") != "sinkhorn":
        return
    if config.get("moe_aux_loss_coeff") == 0 or not _trains(config):
        return
    _refuse(config, f"Sinkhorn routing with {shown(config, 'moe_aux_loss_coeff')} "
            "(AssertionError: Sinkhorn routing does not support aux loss.)",
            flags=("moe_router_load_balancing_type", "moe_aux_loss_coeff"),
            hint="drop --moe-aux-loss-coeff (Sinkhorn balances without it), or use aux_loss "
                 "balancing")


def latent_moe_excludes_shared_expert_overlap(config: Draft) -> None:
    """MoE latent projections exclude shared-expert overlap (0.16.0 and later).

    ``MoELayer.preprocess`` raises at every forward; from 0.18.0 only the NVLS inference
    dispatcher, which training never uses, takes it."""
    if not view.experts(config) or not config.get("moe_latent_size") \
            or not config.get("moe_shared_expert_overlap"):
        return
    if config.env.megatron.between("0.16.0", "0.17.1"):
        says = "Shared expert overlap not supported when MoE latent projections are used."
    elif _trains(config):
        says = ("Shared expert overlap with MoE latent projections is not supported during "
                "training. Disable moe_shared_expert_overlap.")
    else:
        says = ("Shared expert overlap with MoE latent projections requires the NVLS "
                "inference dispatcher. ...")
    _refuse(config, f"{shown(config, 'moe_latent_size')} with --moe-shared-expert-overlap "
            f"(AssertionError: {says})", flags=("moe_latent_size", "moe_shared_expert_overlap"),
            hint="drop --moe-shared-expert-overlap")


def te_cross_entropy_needs_transformer_engine(config: Draft) -> None:
    """Transformer Engine's cross entropy fusion needs Transformer Engine (0.13.0-0.18.0).

    The loss raises at the first iteration; 0.18.2 refuses the fusion in validate_args."""
    if not config.get("cross_entropy_loss_fusion") or \
            config.get("cross_entropy_fusion_impl") != "te" or \
            not config.env.megatron.before("0.18.2"):
        return
    env = config.env
    if env.package_version(TRANSFORMER_ENGINE) is not None or not env.knows_package(
            TRANSFORMER_ENGINE):
        return  # installed, or unknown on this machine: not judged
    _refuse(config, "--cross-entropy-fusion-impl te needs Transformer Engine, not installed "
            "(RuntimeError: Trying to use a TE block when it's not present.)",
            flags=("cross_entropy_loss_fusion", "cross_entropy_fusion_impl"),
            hint="use --cross-entropy-fusion-impl native, or install Transformer Engine")


def probs_on_input_needs_top_1_routing(config: Draft) -> None:
    """``--moe-apply-probs-on-input`` works with top-1 routing only (every release).

    The experts' forward asserts it."""
    topk = config.get("moe_router_topk") or 2
    if not view.experts(config) or not config.get("moe_apply_probs_on_input") or topk == 1 \
            or not _trains(config):
        return
    _refuse(config, f"--moe-apply-probs-on-input with {shown(config, 'moe_router_topk', topk)} "
            "(AssertionError: `moe_apply_probs_on_input` only works with `moe_router_topk`=1.)",
            flags=("moe_apply_probs_on_input", "moe_router_topk"),
            hint="use --moe-router-topk 1, or drop --moe-apply-probs-on-input")


def per_token_loss_excludes_average_in_collective(config: Draft) -> None:
    """Per-token loss cannot average in the collective (every release).

    Megatron's ``DistributedDataParallel`` asserts it when it wraps the model."""
    if not config.get("calculate_per_token_loss") or not config.get(
            "ddp_average_in_collective"):
        return
    if config.get("use_megatron_fsdp") or config.get("use_torch_fsdp2"):
        return  # another wrapper
    _refuse(config, "--calculate-per-token-loss with --ddp-average-in-collective "
            "(AssertionError: Cannot average in collective when calculating per-token loss!)",
            flags=("calculate_per_token_loss", "ddp_average_in_collective"),
            hint="drop --ddp-average-in-collective", when=AT_SET_UP)


def manual_gc_interval_not_negative(config: Draft) -> None:
    """The manual garbage-collection interval is not negative (every release).

    ``train`` asserts it before the first iteration."""
    interval = config.get("manual_gc_interval")
    if not config.get("manual_gc") or interval is None or interval >= 0 or not _trains(config):
        return
    _refuse(config, f"--manual-gc with {shown(config, 'manual_gc_interval')} (AssertionError: "
            "Manual garbage collection interval should be larger than or equal to 0)",
            flags=("manual_gc", "manual_gc_interval"),
            hint="use --manual-gc-interval 0 (collect only at the checkpoints) or more",
            when=AT_SET_UP)


def async_save_needs_a_distributed_format(config: Draft) -> None:
    """``--async-save`` needs a distributed checkpoint format (every release).

    With the legacy ``torch`` format ``save_checkpoint`` raises at the first save."""
    if not config.get("async_save") or not config.get("save") or \
            config.get("ckpt_format") != "torch":
        return
    _refuse(config, "--async-save with --ckpt-format torch (NotImplementedError: Async "
            "checkpoint save not implemented for legacy checkpoints)",
            flags=("async_save", "ckpt_format"),
            hint="use --ckpt-format torch_dist, or drop --async-save", when=AT_FIRST_SAVE)


def local_checkpoints_exclude_fully_reshardable_optimizer(config: Draft) -> None:
    """Local checkpoints exclude a fully reshardable distributed optimizer (0.15.0 and later).

    ``save_checkpoint`` raises at the first local non-persistent save."""
    if config.get("non_persistent_ckpt_type") != "local" or not config.get(
            "non_persistent_save_interval") or not config.env.megatron.at_least("0.15.0"):
        return
    if not config.get("use_distributed_optimizer") or not config.get(
            "dist_ckpt_optim_fully_reshardable") or config.get("ckpt_format") == "fsdp_dtensor":
        return
    _refuse(config, "--non-persistent-ckpt-type local with --dist-ckpt-optim-fully-reshardable "
            "(RuntimeError: Local checkpointing does not support optimizer sharding type "
            "'fully_reshardable'. Don't use '--dist-ckpt-optim-fully-reshardable' when saving "
            "local checkpoints.)",
            flags=("non_persistent_ckpt_type", "dist_ckpt_optim_fully_reshardable"),
            hint="drop --dist-ckpt-optim-fully-reshardable, or use global non-persistent "
                 "checkpoints", when=AT_FIRST_SAVE)


def quantile_balancing_limits(config: Draft) -> None:
    """Quantile balancing takes no group-limited routing or fused router (0.19.0 and later).

    ``TopKRouter.quantile_balancing`` asserts both at the first forward."""
    if not view.experts(config) or config.get("moe_router_load_balancing_type") != \
            "quantile_balancing" or not config.env.megatron.at_least("0.19.0") \
            or not _trains(config):
        return
    if config.get("moe_router_num_groups") is not None or config.get(
            "moe_router_group_topk") is not None:
        _refuse(config, "quantile-balancing routing with group-limited routing "
                "(AssertionError: Quantile balancing routing does not support group-limited "
                "routing.)", flags=("moe_router_load_balancing_type", "moe_router_num_groups",
                                    "moe_router_group_topk"),
                hint="drop --moe-router-num-groups and --moe-router-group-topk")
    if config.get("moe_router_fusion"):
        _refuse(config, "quantile-balancing routing with --moe-router-fusion (AssertionError: "
                "Quantile balancing routing does not support moe_router_fusion.)",
                flags=("moe_router_load_balancing_type", "moe_router_fusion"),
                hint="drop --moe-router-fusion")


def mtp_uniform_recompute_one_layer(config: Draft) -> None:
    """MTP with uniform full recompute recomputes one layer per chunk (0.14.0 and later).

    ``MultiTokenPredictionLayer._checkpointed_forward`` asserts it."""
    if not config.get("mtp_num_layers") or not config.env.megatron.at_least("0.14.0"):
        return
    if view.recompute_granularity_final(config) != "full" or config.get(
            "recompute_method") != "uniform" or config.get("recompute_num_layers") in (1, None):
        return
    if not _trains(config):
        return
    _refuse(config, f"multi-token prediction with uniform full recompute and "
            f"{shown(config, 'recompute_num_layers')} (AssertionError: recompute_num_layers "
            "must be 1 for MTP recompute)",
            flags=("mtp_num_layers", "recompute_method", "recompute_num_layers"),
            hint="use --recompute-num-layers 1, or --recompute-method block")


def muon_excludes_fp16(config: Draft) -> None:
    """Muon takes no fp16 (0.16.0 and later).

    Megatron's optimizer builder raises: ``get_megatron_muon_optimizer`` (0.16.0-0.17.1),
    then the check of every emerging optimizer (0.18.0 and later)."""
    if config.get("optimizer") != "muon" or not config.get("fp16") or \
            not config.env.megatron.at_least("0.16.0"):
        return
    says = ("Exception: muon with fp16 is not supported." if config.env.megatron.before(
        "0.18.0") else "ValueError: emerging optimizer with fp16 is not supported.")
    _refuse(config, f"--optimizer muon with --fp16 ({says})", flags=("optimizer", "fp16"),
            hint="use --bf16, or --optimizer adam", when=AT_SET_UP)


def fp32_reduce_scatter_needs_one_optimizer_instance(config: Draft) -> None:
    """FP32-accumulating reduce-scatter needs one optimizer instance (0.16.0 and later).

    The gradient buffers' bucket groups assert it when DDP builds them."""
    instances = config.get("num_distributed_optimizer_instances") or 1
    if instances <= 1 or not config.get("ddp_reduce_scatter_with_fp32_accumulation") or \
            not config.env.megatron.at_least("0.16.0"):
        return
    if config.get("use_megatron_fsdp") or config.get("use_torch_fsdp2"):
        return  # another wrapper
    _refuse(config, f"--ddp-reduce-scatter-with-fp32-accumulation with "
            f"{shown(config, 'num_distributed_optimizer_instances')} (AssertionError: RS w/ "
            "FP32 accumulation not supported with num_distributed_optimizer_instances > 1)",
            flags=("ddp_reduce_scatter_with_fp32_accumulation",
                   "num_distributed_optimizer_instances"),
            hint="drop --ddp-reduce-scatter-with-fp32-accumulation, or use one optimizer "
                 "instance", when=AT_SET_UP)


def partial_distributed_optimizer_needs_it(config: Draft) -> None:
    """Several optimizer instances need the distributed optimizer (every release).

    ``DistributedDataParallel`` asserts it when it wraps the model."""
    if (config.get("num_distributed_optimizer_instances") or 1) <= 1 or config.get(
            "use_distributed_optimizer"):
        return
    if config.get("use_megatron_fsdp") or config.get("use_torch_fsdp2"):
        return  # another wrapper
    _refuse(config, f"{shown(config, 'num_distributed_optimizer_instances')} without "
            "--use-distributed-optimizer (AssertionError: Partial DistOpt cannot be used "
            "without DistOpt)", flags=("num_distributed_optimizer_instances",
                                       "use_distributed_optimizer"),
            hint="add --use-distributed-optimizer, or use one optimizer instance",
            when=AT_SET_UP)


def mla_flops_exclude_group_query_attention(config: Draft) -> None:
    """MLA with ``--group-query-attention`` dies counting FLOPs (0.13.0-0.15.3).

    ``num_floating_point_operations``, run at every iteration, asserts they are not
    combined; 0.16.0 refuses them in validate_args."""
    if not view.multi_latent_attention(config) or not config.get("group_query_attention"):
        return
    if not config.env.megatron.before("0.16.0") or not _trains(config):
        return
    _refuse(config, "--multi-latent-attention with --group-query-attention (AssertionError "
            "in num_floating_point_operations, after the first iteration)",
            flags=("multi_latent_attention", "group_query_attention"),
            hint="drop --group-query-attention (MLA has its own key-value compression)")


def early_flex_dispatcher_needs_deep_ep(config: Draft) -> None:
    """The flex dispatcher of 0.13.0-0.15.3 runs only on DeepEP.

    ``MoEFlexTokenDispatcher.__init__`` asserts it when the MoE layers are built (its
    capacity-padding assert is the moe family's, which every release shares)."""
    if not view.experts(config) or config.get("moe_token_dispatcher_type") != "flex" or \
            not config.env.megatron.before("0.16.0") or config.get("moe_enable_deepep"):
        return
    _refuse(config, "--moe-token-dispatcher-type flex without --moe-enable-deepep "
            "(AssertionError: DeepEP is not enabled. Please set --moe-enable-deepep to use "
            "DeepEP backend.)", flags=("moe_token_dispatcher_type", "moe_enable_deepep"),
            hint="add --moe-enable-deepep, or use the alltoall dispatcher", when=AT_SET_UP)


CHECKS: tuple[Check, ...] = (
    moe_with_tensor_parallelism_needs_sequence_parallelism,
    moe_router_needs_transformer_engine_before_0_17,
    interleaved_schedule_micro_batch_groups,
    sinkhorn_routing_without_aux_loss,
    latent_moe_excludes_shared_expert_overlap,
    te_cross_entropy_needs_transformer_engine,
    probs_on_input_needs_top_1_routing,
    per_token_loss_excludes_average_in_collective,
    manual_gc_interval_not_negative,
    async_save_needs_a_distributed_format,
    local_checkpoints_exclude_fully_reshardable_optimizer,
    quantile_balancing_limits,
    mtp_uniform_recompute_one_layer,
    muon_excludes_fp16,
    fp32_reduce_scatter_needs_one_optimizer_instance,
    partial_distributed_optimizer_needs_it,
    mla_flops_exclude_group_query_attention,
    early_flex_dispatcher_needs_deep_ep,
)
