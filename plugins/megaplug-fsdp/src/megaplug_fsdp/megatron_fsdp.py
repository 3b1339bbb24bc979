"""Megatron-FSDP (``--use-megatron-fsdp``): requirements and derived settings.

Megatron checks and derives these in one place of ``validate_args``, before later steps
(such as ``--freeze-all-layers``) change the distributed optimizer setting; the plugin
does the same in its derive rules, which run before the training plugin's.
"""

from __future__ import annotations


from megaplug import Draft

from .environment import set_if_declared, single_device_connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def sharding_strategies(config: Draft) -> set[str]:
    """Every sharding strategy in use: the general one and the expert one, if set."""
    strategies = {config.data_parallel_sharding_strategy}
    if config.expert_data_parallel_sharding_strategy is not None:
        strategies.add(config.expert_data_parallel_sharding_strategy)
    return strategies


def check_version_and_distributed_optimizer(config: Draft) -> None:
    """v2 brings its own optimizer sharding; v1 needs (and turns on) the distributed optimizer."""
    use_distributed_optimizer = config.get("use_distributed_optimizer", False)
    if config.megatron_fsdp_version == 2:
        if use_distributed_optimizer:
            config.error("--megatron-fsdp-version 2 cannot be combined with "
                         "--use-distributed-optimizer",
                         flags=("megatron_fsdp_version", "use_distributed_optimizer"),
                         hint="drop --use-distributed-optimizer; Megatron-FSDP v2 shards the "
                              "optimizer state itself")
        return
    if not use_distributed_optimizer and "use_distributed_optimizer" in config:
        config.set("use_distributed_optimizer", True, inputs=("use_megatron_fsdp",),
                   reason="Megatron-FSDP v1 runs on the distributed optimizer")
        config.warn("--use-distributed-optimizer is turned on: Megatron-FSDP v1 needs it",
                    flags=("use_megatron_fsdp", "use_distributed_optimizer"))


def check_grouped_moe_parameters(config: Draft) -> None:
    """Megatron-FSDP cannot remap TE grouped-tensor storage of single grouped MoE params."""
    for dest in ("moe_single_grouped_weight", "moe_single_grouped_bias"):
        if config.get(dest, False):
            spelling = config.spelling(dest)
            config.error(f"--use-megatron-fsdp does not support {spelling} yet",
                         flags=("use_megatron_fsdp", dest),
                         hint=f"drop {spelling}, or use the distributed optimizer without "
                              "Megatron-FSDP")


def check_sharding(config: Draft) -> None:
    """What sharded parameters and gradients rule out."""
    strategies = sharding_strategies(config)
    if strategies & {"optim_grads_params", "optim_grads"} and config.get(
            "gradient_accumulation_fusion", False):
        config.warn("gradient accumulation fusion with sharded gradients needs a Transformer "
                    "Engine that supports it under Megatron-FSDP; check your version",
                    flags=("gradient_accumulation_fusion", "data_parallel_sharding_strategy"))
    interval = config.get("check_weight_hash_across_dp_replicas_interval")
    if "optim_grads_params" in strategies and interval is not None:
        config.error("--check-weight-hash-across-dp-replicas-interval cannot be used when "
                     "parameters are sharded (optim_grads_params)",
                     flags=("check_weight_hash_across_dp_replicas_interval",
                            "data_parallel_sharding_strategy"),
                     hint="drop --check-weight-hash-across-dp-replicas-interval, or choose a "
                          "sharding strategy that keeps parameters replicated")
    if config.get("init_model_with_meta_device", False) and strategies == {"no_shard"}:
        config.error("--init-model-with-meta-device is neither supported nor needed with the "
                     "no_shard sharding strategy",
                     flags=("init_model_with_meta_device", "data_parallel_sharding_strategy"),
                     hint="drop --init-model-with-meta-device, or shard with optim, optim_grads "
                          "or optim_grads_params")


def check_environment_and_format(config: Draft) -> None:
    """Megatron-FSDP overlaps communication on several streams and saves DTensor checkpoints."""
    if single_device_connection(config):
        config.error("--use-megatron-fsdp needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, "
                     "found 1", flags=("use_megatron_fsdp", "CUDA_DEVICE_MAX_CONNECTIONS"),
                     hint="unset CUDA_DEVICE_MAX_CONNECTIONS or set it to 32")
    ckpt_format = config.get("ckpt_format")
    if ckpt_format is not None and ckpt_format != "fsdp_dtensor":
        config.error(f"--use-megatron-fsdp saves checkpoints only as --ckpt-format "
                     f"fsdp_dtensor, not {ckpt_format}",
                     flags=("use_megatron_fsdp", "ckpt_format"),
                     hint="add --ckpt-format fsdp_dtensor")


def derive_buffers(config: Draft) -> None:
    """NCCL user buffers and the max-pool allocator both work through the double buffer."""
    if config.get("nccl_ub", False):
        for dest in ("fsdp_manual_registration", "fsdp_double_buffer"):
            if not config[dest]:
                config.set(dest, True, inputs=("use_megatron_fsdp", "nccl_ub"),
                           reason="NCCL user buffers with Megatron-FSDP register them by hand")
        config.warn("--fsdp-double-buffer and --fsdp-manual-registration are turned on for "
                    "--use-nccl-ub", flags=("nccl_ub", "fsdp_double_buffer"))
    if config.megatron_fsdp_max_pool_double_buffer and not config.fsdp_double_buffer:
        config.set("fsdp_double_buffer", True, inputs=("megatron_fsdp_max_pool_double_buffer",),
                   reason="the max-pool allocator is a kind of double buffer")


def derive_early_sharding(config: Draft) -> None:
    """Megatron 0.13: sharding turns on overlaps; --use-custom-fsdp is checked.

    Megatron 0.13: the sharding strategy turns on the overlaps it needs, whatever the
    data-parallel implementation, and ``--use-custom-fsdp`` (Megatron-FSDP's name there)
    has requirements of its own (:func:`check_custom_fsdp`)."""
    if not config.env.megatron.before("0.14.0"):
        return
    strategy = config.data_parallel_sharding_strategy
    overlaps = {"optim_grads_params": ("overlap_param_gather", "overlap_grad_reduce"),
                "optim_grads": ("overlap_grad_reduce",)}.get(strategy, ())
    for name in overlaps:
        set_if_declared(config, name, True, inputs=("data_parallel_sharding_strategy",),
                        reason=f"--data-parallel-sharding-strategy {strategy} overlaps it")
    if config.get("use_custom_fsdp"):
        check_custom_fsdp(config)


def check_custom_fsdp(config: Draft) -> None:
    """What Megatron 0.13's --use-custom-fsdp requires.

    Megatron 0.13's ``--use-custom-fsdp``: the distributed optimizer, no gradient
    accumulation fusion when gradients are sharded, no weight-hash checks with sharded
    parameters, several CUDA connections."""
    strategy = config.data_parallel_sharding_strategy
    if not config.get("use_distributed_optimizer"):
        config.error("--use-custom-fsdp needs --use-distributed-optimizer in Megatron 0.13",
                     flags=("use_custom_fsdp", "use_distributed_optimizer"),
                     hint="add --use-distributed-optimizer")
    if strategy in ("optim_grads_params", "optim_grads") \
            and config.get("gradient_accumulation_fusion"):
        config.error(f"--use-custom-fsdp with --data-parallel-sharding-strategy {strategy} "
                     "does not support gradient accumulation fusion in Megatron 0.13",
                     flags=("use_custom_fsdp", "gradient_accumulation_fusion"),
                     hint="add --no-gradient-accumulation-fusion")
    if strategy == "optim_grads_params" \
            and config.get("check_weight_hash_across_dp_replicas_interval") is not None:
        config.error("--check-weight-hash-across-dp-replicas-interval is not supported with "
                     "--use-custom-fsdp sharding parameters (optim_grads_params)",
                     flags=("check_weight_hash_across_dp_replicas_interval", "use_custom_fsdp"),
                     hint="drop --check-weight-hash-across-dp-replicas-interval")
    if single_device_connection(config):
        config.error("--use-custom-fsdp needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, "
                     "found 1", flags=("use_custom_fsdp", "CUDA_DEVICE_MAX_CONNECTIONS"),
                     hint="unset CUDA_DEVICE_MAX_CONNECTIONS or set it to 32")


def derive_megatron_fsdp(config: Draft) -> None:
    """Check Megatron-FSDP's requirements and derive what it implies, in Megatron's order."""
    if not config.use_megatron_fsdp:
        # Megatron 0.13 names Megatron-FSDP --use-custom-fsdp: a flag of its own, kept
        if config.env.megatron.at_least("0.14.0"):
            config.discard("use_custom_fsdp", reason="only set when Megatron-FSDP is used")
        return
    config.set("use_custom_fsdp", True, inputs=("use_megatron_fsdp",),
               reason="legacy name of --use-megatron-fsdp")
    # up to 0.17 Megatron-FSDP neither asks for the distributed optimizer nor turns it on,
    # and clears the MXFP8 grad-buffer reuse only with manual NCCL registration
    early = config.env.megatron.before("0.18.0")
    if not early:
        check_version_and_distributed_optimizer(config)
    if not early or config.get("fsdp_manual_registration"):
        set_if_declared(config, "reuse_grad_buf_for_mxfp8_param_ag", False,
                        inputs=("use_megatron_fsdp",),
                        reason="Megatron-FSDP has no MXFP8 grad-buffer reuse step")
    check_grouped_moe_parameters(config)
    check_sharding(config)
    check_environment_and_format(config)
    derive_buffers(config)


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_early_sharding,
                                                    derive_megatron_fsdp)
