"""Early checks and derived values of the checkpointing plugin.

Megatron checks a few combinations before other features change the values involved
(``--skip-train`` turns on ``--no-load-optim``; ``--freeze-all-layers`` turns off
``--overlap-param-gather`` and the distributed optimizer; a fake process group turns
off Gloo). Those checks run here in ``normalize``, on the values as given.
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Optimizers whose distributed-optimizer state Megatron can gather with Gloo groups.
GLOO_GATHERED_OPTIMIZERS = ("sgd", "adam")
#: The first Megatron release line that saves synchronously without a persistent worker and
#: skips the optimizer state of an evaluation-only run (docs/megatron-release-rules.md).
SYNCHRONOUS_FALLBACK_RELEASE = "0.16.0"


def check_main_params_need_no_load_optim(config: Draft) -> None:
    """Main params from the checkpoint replace the optimizer's copy, so it must not load too."""
    if config.load_main_params_from_ckpt and not config.no_load_optim:
        config.error("--load-main-params-from-ckpt must be used with --no-load-optim",
                     flags=("load_main_params_from_ckpt", "no_load_optim"),
                     hint="add --no-load-optim")


def check_params_dump_without_param_gather_overlap(config: Draft) -> None:
    """Parameter dumps read parameters that an overlapped all-gather may not have filled."""
    if config.save_params_interval is not None and config.get("overlap_param_gather"):
        config.error("--save-params-interval cannot be used with --overlap-param-gather",
                     flags=("save_params_interval", "overlap_param_gather"),
                     hint="drop --overlap-param-gather while dumping parameters")


def check_gloo_free_checkpointing(config: Draft) -> None:
    """Without Gloo groups the legacy format cannot gather distributed-optimizer state."""
    if config.get("use_gloo_process_groups", True):
        return
    if (config.get("use_distributed_optimizer")
            and config.get("optimizer", "adam") in GLOO_GATHERED_OPTIMIZERS
            and config.ckpt_format == "torch"):
        config.error("--disable-gloo-process-groups with the distributed optimizer needs a "
                     "distributed checkpoint format, not --ckpt-format torch",
                     flags=("use_gloo_process_groups", "use_distributed_optimizer", "ckpt_format"),
                     hint="use --ckpt-format torch_dist, or keep the Gloo process groups")
    if (config.dist_ckpt_optim_fully_reshardable
            and config.distrib_optim_fully_reshardable_mem_efficient):
        config.error("--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups",
                     flags=("distrib_optim_fully_reshardable_mem_efficient",
                            "use_gloo_process_groups"),
                     hint="drop --disable-gloo-process-groups or "
                          "--distrib-optim-fully-reshardable-mem-efficient")


def derive_exit_on_missing_checkpoint(config: Draft) -> None:
    """A conversion run has nothing to do without a checkpoint to convert.

    validate_args says so from Megatron 0.18 on; older lines' initialize_megatron does,
    after it."""
    if config.env.megatron.before("0.18.0"):
        return
    if config.ckpt_convert_format is not None and not config.exit_on_missing_checkpoint:
        config.set("exit_on_missing_checkpoint", True, reason="converting a checkpoint",
                   inputs=("ckpt_convert_format",))


#: The release lines with ``--no-stream-ckpt-dequant`` (generated facts: megatron_releases.py).
STREAM_CKPT_DEQUANT_RELEASES = ("0.19.0", "0.19.2")


def derive_stream_ckpt_dequant(config: Draft) -> None:
    """Streaming dequantisation of a loaded FP8 checkpoint recomputes a per-tensor scale per
    slice, which corrupts tensorwise-scaled weights: Megatron 0.19 falls back to the upfront
    dequantize pass."""
    if (config.env.megatron.between(*STREAM_CKPT_DEQUANT_RELEASES)
            and config.fp8 and config.fp8_recipe == "tensorwise" and config.stream_ckpt_dequant):
        config.warn("--fp8-recipe tensorwise cannot use the streaming checkpoint dequantize "
                    "path: falling back to the upfront dequantize pass (pass "
                    "--no-stream-ckpt-dequant to silence this)",
                    flags=("--fp8-recipe", "--no-stream-ckpt-dequant"))
        config.set("stream_ckpt_dequant", False, reason="tensorwise FP8 checkpoints are "
                   "dequantized upfront", inputs=("fp8", "fp8_recipe"))


def derive_use_dist_ckpt(config: Draft) -> None:
    """Every format except the legacy ``torch`` one is a distributed checkpoint."""
    config.set("use_dist_ckpt", config.ckpt_format != "torch", inputs=("ckpt_format",))


def derive_async_save(config: Draft) -> None:
    """Asynchronous distributed saves need the persistent worker; without it save synchronously
    (from Megatron 0.16; older releases tried the asynchronous save anyway)."""
    if config.env.megatron.before(SYNCHRONOUS_FALLBACK_RELEASE):
        return
    if config.use_dist_ckpt and config.async_save and not config.use_persistent_ckpt_worker:
        config.warn("--async-save needs --use-persistent-ckpt-worker; saving synchronously",
                    flags=("async_save", "use_persistent_ckpt_worker"))
        config.set("async_save", False, reason="no persistent checkpoint worker",
                   inputs=("async_save", "use_persistent_ckpt_worker"))


def derive_async_strategy(config: Draft) -> None:
    """The nvrx strategy only serves asynchronous saves; synchronous runs report ``mcore``
    (from megatron-core 0.17.1; 0.17.0 keeps the declared ``nvrx``)."""
    if config.env.megatron.before("0.17.1"):
        return
    if not config.async_save and config.async_strategy == "nvrx":
        config.set("async_strategy", "mcore", reason="checkpoints are saved synchronously",
                   inputs=("async_save",))


def derive_skip_train_no_load_optim(config: Draft) -> None:
    """Evaluation-only runs have no use for the optimizer state (from Megatron 0.16)."""
    if config.env.megatron.before(SYNCHRONOUS_FALLBACK_RELEASE):
        return
    if config.get("skip_train") and not config.no_load_optim:
        config.warn("--skip-train turns on --no-load-optim", flags=("no_load_optim",))
        config.set("no_load_optim", True, reason="training is skipped", inputs=("skip_train",))


def derive_replication_jump(config: Draft) -> None:
    """A replication jump means nothing without replication; drop it."""
    if not config.replication and config.replication_jump:
        config.warn("--replication-jump is ignored without --replication",
                    flags=("replication_jump", "replication"))
        config.set("replication_jump", None, reason="replication is off", inputs=("replication",))


# checks of the values as given, run before other plugins adjust them
NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    check_main_params_need_no_load_optim,
    check_params_dump_without_param_gather_overlap,
    check_gloo_free_checkpointing,
)

DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_exit_on_missing_checkpoint,
    derive_use_dist_ckpt,
    derive_stream_ckpt_dequant,
    derive_async_save,
    derive_async_strategy,
    derive_skip_train_no_load_optim,
    derive_replication_jump,
)
