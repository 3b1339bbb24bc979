"""The RL checks, one small function each.

Every check applies only to an RL run (``--perform-rl-step``): without it Megatron accepts
any combination of these flags. Each reads the final values (Megatron runs its RL checks
after the training and checkpointing settings it depends on are settled).
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Package that keeps device addresses stable when memory is released and re-allocated.
MEMORY_SAVER = "torch_memory_saver"


def _has_memory_saver(config: Draft) -> bool:
    return config.env.package_version(MEMORY_SAVER) is not None


def _inference_uvm_level(config: Draft) -> int:
    return int(config.get("inference_dynamic_batching_unified_memory_level", 0) or 0)


def persisted_graphs_need_graphs(config: Draft) -> None:
    """--rl-persist-cuda-graphs is meaningless when no CUDA graphs are built."""
    if config.rl_persist_cuda_graphs and config.get("cuda_graph_impl", "none") == "none":
        config.error(
            "--rl-persist-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs "
            "are built to persist",
            flags=("rl_persist_cuda_graphs", "--cuda-graph-impl"),
            hint="choose a --cuda-graph-impl (e.g. local), or drop --rl-persist-cuda-graphs")


def training_graphs_need_graphs(config: Draft) -> None:
    """--rl-training-cuda-graphs is meaningless when no CUDA graphs are built."""
    if config.rl_training_cuda_graphs and config.get("cuda_graph_impl", "none") == "none":
        config.error(
            "--rl-training-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs "
            "are built for training",
            flags=("rl_training_cuda_graphs", "--cuda-graph-impl"),
            hint="choose a --cuda-graph-impl (e.g. local), or drop --rl-training-cuda-graphs")


def persisted_graphs_need_static_kv_memory(config: Draft) -> None:
    """Persisted graphs point into the KV cache, so its addresses must not move."""
    mode = config.rl_kv_cache_management_mode
    if not config.rl_persist_cuda_graphs or mode == "persist":
        return
    if _has_memory_saver(config) or _inference_uvm_level(config) > 0:
        return
    config.error(
        f"--rl-persist-cuda-graphs with --rl-kv-cache-management-mode {mode} needs KV cache "
        f"memory at fixed addresses, but neither unified memory nor {MEMORY_SAVER} is available",
        flags=("rl_persist_cuda_graphs", "rl_kv_cache_management_mode",
               "--inference-dynamic-batching-unified-memory-level"),
        hint=f"use --rl-kv-cache-management-mode persist, set "
             f"--inference-dynamic-batching-unified-memory-level 1, or install {MEMORY_SAVER}")


def offloaded_kv_cache_needs_persisted_graphs(config: Draft) -> None:
    """Recapturing graphs runs dummy forward passes that would overwrite offloaded KV data."""
    if config.rl_kv_cache_management_mode == "offload" and not config.rl_persist_cuda_graphs:
        config.error(
            "--rl-kv-cache-management-mode offload requires --rl-persist-cuda-graphs: CUDA "
            "graphs cannot be recaptured while the KV cache is offloaded",
            flags=("rl_kv_cache_management_mode", "rl_persist_cuda_graphs"),
            hint="add --rl-persist-cuda-graphs, or use --rl-kv-cache-management-mode "
                 "persist or recompute")


def offloaded_kv_cache_excludes_uvm(config: Draft) -> None:
    """Unified memory already migrates the KV cache; offloading it by hand conflicts."""
    level = _inference_uvm_level(config)
    if config.rl_kv_cache_management_mode == "offload" and level > 0:
        config.error(
            f"--rl-kv-cache-management-mode offload cannot be combined with unified memory "
            f"(--inference-dynamic-batching-unified-memory-level {level})",
            flags=("rl_kv_cache_management_mode",
                   "--inference-dynamic-batching-unified-memory-level"),
            hint="use --inference-dynamic-batching-unified-memory-level 0, or "
                 "--rl-kv-cache-management-mode persist")


def weight_offload_needs_uvm_or_memory_saver(config: Draft) -> None:
    """Offloading idle inference weights keeps graph pointers valid only via UVM or a saver."""
    if not config.rl_offload_inference_model_weights_when_idle:
        return
    if config.rl_inference_model_unified_memory_level == 1 or _has_memory_saver(config):
        return
    config.error(
        f"--rl-offload-inference-model-weights-when-idle needs unified memory "
        f"(--rl-inference-model-unified-memory-level 1) or the {MEMORY_SAVER} package",
        flags=("rl_offload_inference_model_weights_when_idle",
               "rl_inference_model_unified_memory_level"),
        hint=f"set --rl-inference-model-unified-memory-level 1, or install {MEMORY_SAVER}")


INFERENCE_SIZES = (
    "rl_inference_tensor_model_parallel_size",
    "rl_inference_pipeline_model_parallel_size",
    "rl_inference_expert_model_parallel_size",
    "rl_inference_expert_tensor_model_parallel_size",
)


def uses_separate_inference_model(config: Draft) -> bool:
    """Whether rollouts run on their own copy of the model rather than the trained one.

    That is the case when any inference parallel size is given, when inference is
    sharded (--inference-shards), or when training uses context parallelism (inference
    does not support it, so a context-parallel-free copy is built).
    """
    return (any(config[dest] is not None for dest in INFERENCE_SIZES)
            or config.get("inference_shards") is not None
            or (config.get("context_parallel_size", 1) or 1) > 1)


def weight_offload_needs_separate_inference_model(config: Draft) -> None:
    """Shared weights are the training weights; only a separate copy can be offloaded."""
    if (config.rl_offload_inference_model_weights_when_idle
            and not uses_separate_inference_model(config)):
        config.error(
            "--rl-offload-inference-model-weights-when-idle requires a separate inference "
            "model, but inference shares the training model's weights",
            flags=("rl_offload_inference_model_weights_when_idle", *INFERENCE_SIZES),
            hint="set an --rl-inference-*-model-parallel-size (or --inference-shards), or drop "
                 "--rl-offload-inference-model-weights-when-idle")


def requests_per_batch(config: Draft) -> int:
    """Rollout requests of one trainer batch: prompts per step x group size."""
    return config.grpo_prompts_per_step * config.grpo_group_size


def inflight_requests_exclude_generation_lag(config: Draft) -> None:
    """--rl-max-inflight-requests is the generation lag counted in requests: not both."""
    if (config.rl_max_inflight_requests is not None
            and config.given_value("rl_generation_lag") is not None):
        config.error(
            "--rl-generation-lag and --rl-max-inflight-requests are mutually exclusive "
            "(the in-flight requests set the lag)",
            flags=("rl_generation_lag", "rl_max_inflight_requests"),
            hint="keep one of --rl-generation-lag and --rl-max-inflight-requests")


def inflight_requests_at_least_one(config: Draft) -> None:
    """Generation needs at least one request in flight."""
    inflight = config.rl_max_inflight_requests
    if inflight is not None and inflight < 1:
        config.error(
            f"--rl-max-inflight-requests {inflight} must be >= 1",
            flags=("rl_max_inflight_requests",),
            hint="use 1 or more, or drop --rl-max-inflight-requests")


def inflight_requests_beyond_a_batch_need_partial_rollouts(config: Draft) -> None:
    """More requests in flight than one trainer batch means a generation lag above 0."""
    inflight, per_batch = config.rl_max_inflight_requests, requests_per_batch(config)
    if inflight is not None and inflight > per_batch and not config.rl_partial_rollouts:
        config.error(
            f"--rl-max-inflight-requests {inflight} above one training batch ({per_batch} "
            "requests: --grpo-prompts-per-step x --grpo-group-size) requires "
            "--rl-partial-rollouts",
            flags=("rl_max_inflight_requests", "rl_partial_rollouts", "grpo_prompts_per_step",
                   "grpo_group_size"),
            hint=f"add --rl-partial-rollouts, or keep --rl-max-inflight-requests at most "
                 f"{per_batch}")


def _lag_is_given(config: Draft) -> bool:
    """The lag checks are for a lag the user gave: one derived from the in-flight requests
    is checked through those."""
    return config.rl_max_inflight_requests is None and config.rl_generation_lag is not None


def generation_lag_at_least_minus_one(config: Draft) -> None:
    """A lag of -1 already keeps a single unit of generation work in flight (Megatron-LM
    main; 0.19 takes any lag)."""
    lag = config.rl_generation_lag
    if _lag_is_given(config) and lag < -1 and config.env.megatron.at_least("main"):
        config.error(
            f"--rl-generation-lag {lag:g} must be >= -1",
            flags=("rl_generation_lag",),
            hint="use -1 (one unit of generation work in flight) or more")


def generation_lag_needs_partial_rollouts(config: Draft) -> None:
    """A generation lag means rollouts span policy updates, i.e. partial rollouts."""
    lag = config.rl_generation_lag
    if _lag_is_given(config) and lag > 0 and not config.rl_partial_rollouts:
        config.error(
            f"--rl-generation-lag requires --rl-partial-rollouts when above 0 (got {lag:g})",
            flags=("rl_generation_lag", "rl_partial_rollouts"),
            hint="add --rl-partial-rollouts, or set --rl-generation-lag 0")


def streamed_submission_needs_partial_rollouts(config: Draft) -> None:
    """Submitting groups or single rollouts streams them, which partial rollouts provide
    (Megatron 0.19 asks this of single rollouts, ``R``, only)."""
    granularity = config.rl_submission_granularity
    if granularity == "G" and config.env.megatron.before("main"):
        return
    if granularity != "B" and not config.rl_partial_rollouts:
        config.error(
            f"--rl-submission-granularity {granularity} requires --rl-partial-rollouts "
            "(rollouts are streamed, not submitted as a whole batch)",
            flags=("rl_submission_granularity", "rl_partial_rollouts"),
            hint="add --rl-partial-rollouts, or use --rl-submission-granularity B")


def rollout_consumption_unsupported(config: Draft) -> None:
    """Training cannot consume single rollouts yet."""
    if config.rl_consumption_granularity == "R":
        config.error(
            "--rl-consumption-granularity R is not currently supported",
            flags=("rl_consumption_granularity",),
            hint="use --rl-consumption-granularity G or B")


def batch_submission_with_group_consumption(config: Draft) -> None:
    """Whole-batch submission cannot feed group-by-group consumption."""
    if config.rl_submission_granularity == "B" and config.rl_consumption_granularity == "G":
        config.error(
            "--rl-submission-granularity B cannot be combined with "
            "--rl-consumption-granularity G",
            flags=("rl_submission_granularity", "rl_consumption_granularity"),
            hint="use --rl-submission-granularity G or R (with --rl-partial-rollouts), or "
                 "--rl-consumption-granularity B")


def sequence_packing_needs_micro_batch_one(config: Draft) -> None:
    """Packed bins already fill a sequence; a micro batch holds exactly one bin."""
    micro = config.get("micro_batch_size")
    if config.rl_use_sequence_packing and micro is not None and micro != 1:
        config.error(
            f"--rl-use-sequence-packing requires --micro-batch-size 1, got {micro}",
            flags=("rl_use_sequence_packing", "--micro-batch-size"),
            hint="set --micro-batch-size 1 and raise --seq-length for more work per micro "
                 "batch, or drop --rl-use-sequence-packing")


def samples_per_rollout_phase(config: Draft) -> int:
    """Rollouts generated per inference phase: prompts x group size x GRPO iterations."""
    return config.grpo_prompts_per_step * config.grpo_group_size * config.grpo_iterations


def rollouts_fill_global_batches(config: Draft) -> None:
    """Each inference phase must produce a whole number of global batches."""
    gbs = config.get("global_batch_size")
    samples = samples_per_rollout_phase(config)
    if gbs and samples % gbs:
        config.error(
            f"--grpo-prompts-per-step {config.grpo_prompts_per_step} x --grpo-group-size "
            f"{config.grpo_group_size} x --grpo-iterations {config.grpo_iterations} = "
            f"{samples} rollouts per inference phase is not a multiple of "
            f"--global-batch-size {gbs}",
            flags=("grpo_prompts_per_step", "grpo_group_size", "grpo_iterations",
                   "--global-batch-size"),
            hint=f"make the product a multiple of {gbs}, or use a global batch size that "
                 f"divides {samples}")


def intervals_on_rollout_boundaries(config: Draft) -> None:
    """Rollouts are not checkpointed, so exits and saves happen only after a whole phase."""
    gbs = config.get("global_batch_size")
    samples = samples_per_rollout_phase(config)
    if not gbs or samples % gbs:
        return  # the batch check above reports this; no phase length to compare with
    steps = samples // gbs
    for dest, spelling in (("exit_interval", "--exit-interval"),
                           ("save_interval", "--save-interval")):
        value = config.get(dest)
        if value is None:
            continue
        if steps == 0:
            # Megatron divides the interval by the phase length and fails on zero.
            config.error(
                f"{spelling} {value} cannot be aligned with GRPO inference phases that "
                f"generate no rollouts (--grpo-prompts-per-step {config.grpo_prompts_per_step}"
                f" x --grpo-group-size {config.grpo_group_size} x --grpo-iterations "
                f"{config.grpo_iterations} = 0)",
                flags=(spelling, "grpo_prompts_per_step", "grpo_group_size", "grpo_iterations"),
                hint="make --grpo-prompts-per-step, --grpo-group-size and --grpo-iterations "
                     f"positive, or drop {spelling}")
        elif value % steps:
            config.error(
                f"{spelling} {value} is not a multiple of the {steps} training iterations "
                f"of one GRPO inference phase ({samples} rollouts / --global-batch-size {gbs})",
                flags=(spelling, "grpo_prompts_per_step", "grpo_group_size", "grpo_iterations",
                       "--global-batch-size"),
                hint=f"use a multiple of {steps} for {spelling}, since generated rollouts "
                     "are not checkpointed")


def optimizer_offload_needs_optimizer(config: Draft) -> None:
    """An inference-only RL run without an optimizer has nothing to offload."""
    if (config.get("skip_train") and config.get("no_load_optim")
            and config.rl_offload_optimizer_during_inference):
        config.error(
            "--rl-offload-optimizer-during-inference has no optimizer to offload: "
            "--skip-train with --no-load-optim builds none",
            flags=("rl_offload_optimizer_during_inference", "--skip-train", "--no-load-optim"),
            hint="drop --rl-offload-optimizer-during-inference for an inference-only run")


#: Every RL check, in Megatron's order.
CHECKS: tuple[Callable[[Draft], None], ...] = (
    persisted_graphs_need_graphs,
    training_graphs_need_graphs,
    persisted_graphs_need_static_kv_memory,
    offloaded_kv_cache_needs_persisted_graphs,
    offloaded_kv_cache_excludes_uvm,
    weight_offload_needs_uvm_or_memory_saver,
    weight_offload_needs_separate_inference_model,
    inflight_requests_exclude_generation_lag,
    inflight_requests_at_least_one,
    inflight_requests_beyond_a_batch_need_partial_rollouts,
    generation_lag_at_least_minus_one,
    generation_lag_needs_partial_rollouts,
    streamed_submission_needs_partial_rollouts,
    rollout_consumption_unsupported,
    batch_submission_with_group_consumption,
    sequence_packing_needs_micro_batch_one,
    rollouts_fill_global_batches,
    intervals_on_rollout_boundaries,
    optimizer_offload_needs_optimizer,
)
