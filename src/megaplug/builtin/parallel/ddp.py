"""Data-parallel training: gradient reduction and parameter gather overlap, the distributed
optimizer, Gloo process groups and the fake process group."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


#: Settings whose late derivations turn a switch off only after Megatron's checks saw it on:
#: ``--freeze-all-layers``, and an emerging ``--optimizer`` that replaces the distributed
#: optimizer with its layer-wise one.
_LATE_SWITCH_OFFS = ("freeze_all_layers", "optimizer")


def _before_freeze(config: Draft, dest: str) -> bool:
    """A switch as Megatron's checks saw it, before the late derivations turned it off."""
    if config[dest]:
        return True
    record = config.source(dest)
    return bool(record is not None and record.source == "derived"
                and any(name in record.inputs for name in _LATE_SWITCH_OFFS))


def check_overlap_param_gather_sharding(config: Draft) -> None:
    """Overlapping the parameter all-gather needs parameters gathered after the step: the
    distributed optimizer or the distributed Muon optimizer (a feature that shards
    parameters itself takes this rule over)."""
    if not _before_freeze(config, "overlap_param_gather"):
        return
    if not (_before_freeze(config, "use_distributed_optimizer")
            or config.get("optimizer") == "dist_muon"):
        config.error("--overlap-param-gather needs sharded parameters: --use-distributed-optimizer"
                     " or --optimizer dist_muon",
                     flags=("overlap_param_gather", "use_distributed_optimizer"),
                     hint="add --use-distributed-optimizer, or drop --overlap-param-gather")


def check_overlap_param_gather_reduce(config: Draft) -> None:
    """Overlapping the parameter all-gather needs overlapped gradient reduction."""
    if _before_freeze(config, "overlap_param_gather") and not config.overlap_grad_reduce:
        config.error("--overlap-param-gather needs --overlap-grad-reduce",
                     flags=("overlap_param_gather", "overlap_grad_reduce"),
                     hint="add --overlap-grad-reduce")


def check_overlap_param_gather_with_optimizer_step(config: Draft) -> None:
    """Overlapping the first bucket's gather with the step has narrow prerequisites."""
    if not config.overlap_param_gather_with_optimizer_step:
        return
    flag = "overlap_param_gather_with_optimizer_step"
    requirements = (
        (_before_freeze(config, "use_distributed_optimizer"), "use_distributed_optimizer",
         "--use-distributed-optimizer"),
        (_before_freeze(config, "overlap_param_gather"), "overlap_param_gather",
         "--overlap-param-gather"),
        (config.virtual_pipeline_model_parallel_size is not None,
         "num_layers_per_virtual_pipeline_stage",
         "the interleaved pipeline schedule (virtual pipeline stages)"),
        (not config.get("use_dist_ckpt", False), "ckpt_format",
         "a non-distributed checkpoint format (--ckpt-format torch)"),
    )
    for satisfied, other, wanted in requirements:
        if not satisfied:
            config.error(f"--overlap-param-gather-with-optimizer-step needs {wanted}",
                         flags=(flag, other),
                         hint=f"use {wanted}, or drop --overlap-param-gather-with-optimizer-step")


def check_distributed_optimizer_instances(config: Draft) -> None:
    """Several optimizer instances shard over equal parts of the data-parallel group.

    Megatron's argument validation accepts any count (the process groups are built later),
    so these are warnings.
    """
    instances = config.num_distributed_optimizer_instances
    if instances < 1:
        config.warn(f"--num-distributed-optimizer-instances is {instances}; it should be at "
                    "least 1", flags=("num_distributed_optimizer_instances",))
        return
    if instances == 1:
        return
    if not _before_freeze(config, "use_distributed_optimizer"):
        config.warn(f"--num-distributed-optimizer-instances {instances} has no effect without "
                    "--use-distributed-optimizer",
                    flags=("num_distributed_optimizer_instances", "use_distributed_optimizer"))
    if config.data_parallel_size is None:
        return
    # each instance shards over an equal slice of the combined data x context group
    ranks = config.data_parallel_size * config.context_parallel_size
    if ranks % instances:
        config.warn(f"{ranks} data x context-parallel ranks cannot be split into "
                    f"--num-distributed-optimizer-instances {instances} equal groups",
                    flags=("num_distributed_optimizer_instances",))


def _gloo_disabled_by_user(config: Draft) -> bool:
    """Gloo groups as the user chose, before a fake process group turned them off."""
    if config.fake_process_group:
        return config.given("use_gloo_process_groups")
    return not config.use_gloo_process_groups


def check_gloo_requirements(config: Draft) -> None:
    """Without Gloo groups, features that gather state on the CPU are unavailable."""
    if not _gloo_disabled_by_user(config):
        return
    if (_before_freeze(config, "use_distributed_optimizer")
            and config.get("optimizer") in ("sgd", "adam")
            and config.get("use_dist_ckpt") is False):
        config.error("--disable-gloo-process-groups with --use-distributed-optimizer needs a "
                     "distributed checkpoint format: the legacy format gathers optimizer state "
                     "over Gloo",
                     flags=("use_gloo_process_groups", "use_distributed_optimizer", "ckpt_format"),
                     hint="use --ckpt-format torch_dist, or keep Gloo process groups")
    if (config.get("dist_ckpt_optim_fully_reshardable")
            and config.get("distrib_optim_fully_reshardable_mem_efficient")):
        config.error("--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups",
                     flags=("distrib_optim_fully_reshardable_mem_efficient",
                            "use_gloo_process_groups"),
                     hint="drop --disable-gloo-process-groups or the memory-efficient mode")


def derive_fake_process_group(config: Draft) -> None:
    """A fake process group cannot check for NaNs across ranks or host Gloo groups."""
    if not config.fake_process_group:
        return
    if config.get("check_for_nan_in_loss_and_grad"):
        config.warn("turning off the NaN check in loss and gradients for the fake process group",
                    flags=("fake_process_group", "check_for_nan_in_loss_and_grad"))
        config.set("check_for_nan_in_loss_and_grad", False, inputs=("fake_process_group",))
    if config.use_gloo_process_groups:
        config.warn("turning off Gloo process groups for the fake process group",
                    flags=("fake_process_group", "use_gloo_process_groups"))
        config.set("use_gloo_process_groups", False, inputs=("fake_process_group",))


def check_delay_wgrad_compute(config: Draft) -> None:
    """Delayed weight-gradient computation is a Transformer Engine feature with version floors
    (Megatron 0.13 refuses it with overlapped gradient reduction; 0.14 asks TE 2.7 for that,
    later releases 2.8; from 0.17, with overlapped reduction, graphed attention too)."""
    if not config.delay_wgrad_compute:
        return
    if config.get("transformer_impl", "transformer_engine") != "transformer_engine":
        config.error("--delay-wgrad-compute needs --transformer-impl transformer_engine",
                     flags=("delay_wgrad_compute", "transformer_impl"),
                     hint="use the Transformer Engine implementation or drop the flag")
    env = config.env
    if env.megatron.before("0.14.0"):
        if config.overlap_grad_reduce:
            config.error("--delay-wgrad-compute does not support --overlap-grad-reduce in "
                         "Megatron 0.13", flags=("delay_wgrad_compute", "overlap_grad_reduce"),
                         hint="drop --overlap-grad-reduce (Megatron 0.14 and later take both)")
        return
    overlap_te = "2.7.0" if env.megatron.before("0.15.0") else "2.8.0"
    _require_te(config, config.overlap_grad_reduce, overlap_te, "with --overlap-grad-reduce",
                ("delay_wgrad_compute", "overlap_grad_reduce"))
    if not config.get("gradient_accumulation_fusion", True):
        _require_te(config, True, "2.7.0", "without gradient accumulation fusion",
                    ("delay_wgrad_compute", "gradient_accumulation_fusion"))
    if env.megatron.at_least("0.17.0") and config.overlap_grad_reduce:
        _check_delay_wgrad_cuda_graphs(config)  # Megatron asks only while it overlaps


def _require_te(config: Draft, needed: bool, version: str, when: str,
                flags: tuple[str, ...]) -> None:
    problem = config.env.requirement_problem("transformer_engine", version) if needed else None
    if problem:
        config.error(f"--delay-wgrad-compute {when} {problem}", flags=flags,
                     hint=f"upgrade Transformer Engine to {version} or later")


def _graphed_modules(config: Draft) -> set[str]:
    return {str(getattr(m, "name", m)) for m in config.get("cuda_graph_modules") or []}


def _check_delay_wgrad_cuda_graphs(config: Draft) -> None:
    """Graphed attention keeps its weight-gradient computation inside the CUDA graph, which
    needs Transformer Engine 2.12, gradient accumulation fusion and no attention biases
    (Megatron's ``wgrad_in_graph_scope``; a graphed MoE router is the moe plugin's case)."""
    if "attn" not in _graphed_modules(config):
        return
    flags = ("delay_wgrad_compute", "cuda_graph_modules")
    problem = config.env.requirement_problem("transformer_engine", "2.12.0")
    if problem:
        config.error(f"CUDA graphs with --delay-wgrad-compute {problem}", flags=flags,
                     hint="upgrade Transformer Engine to 2.12.0 or later")
    if not config.get("gradient_accumulation_fusion", True):
        config.error("CUDA graphs with --delay-wgrad-compute need gradient accumulation fusion "
                     "(its static buffers are what graphs can capture)",
                     flags=(*flags, "gradient_accumulation_fusion"),
                     hint="drop --no-gradient-accumulation-fusion")
    if config.get("add_bias_linear") or config.get("add_qkv_bias"):
        config.error("CUDA graphs of attention with --delay-wgrad-compute do not support "
                     "attention biases",
                     flags=(*flags, "add_bias_linear", "add_qkv_bias"),
                     hint="add --disable-bias-linear, or leave attn out of --cuda-graph-modules")


DERIVE: tuple[Callable[[Draft], None], ...] = (derive_fake_process_group,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_overlap_param_gather_sharding,
    check_overlap_param_gather_reduce,
    check_overlap_param_gather_with_optimizer_step,
    check_distributed_optimizer_instances,
    check_gloo_requirements,
    check_delay_wgrad_compute,
)
