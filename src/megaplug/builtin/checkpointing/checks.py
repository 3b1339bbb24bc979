"""Checks of the checkpointing plugin: each a small function that reports through ``config.error``."""  # noqa: E501

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Optimizers with first-class checkpoint support in every format.
STANDARD_OPTIMIZERS = ("sgd", "adam")
#: Formats that emerging optimizers (Muon and friends) can save to.
EMERGING_OPTIMIZER_FORMATS = ("torch", "torch_dist")
LOCAL_CKPT_PACKAGE = "nvidia_resiliency_ext"


def check_conversion_inputs(config: Draft) -> None:
    """Converting needs both a checkpoint to read and a place to write the result.

    validate_args asks from Megatron 0.18 on; older lines ask in initialize_megatron."""
    if config.ckpt_convert_format is None or config.env.megatron.before("0.18.0"):
        return
    for dest, what in (("ckpt_convert_save", "the directory for the converted checkpoint"),
                       ("load", "the checkpoint to convert")):
        if config[dest] is None:
            config.error(f"--ckpt-convert-format needs {config.spelling(dest)}",
                         flags=("ckpt_convert_format", dest),
                         hint=f"add {config.spelling(dest)} DIR with {what}")


def check_non_persistent_type(config: Draft) -> None:
    """Only global and local non-persistent checkpoints are implemented."""
    kind = config.non_persistent_ckpt_type
    if kind not in ("global", "local", None):
        config.error(f"--non-persistent-ckpt-type {kind} is not supported yet",
                     flags=("non_persistent_ckpt_type",), hint="use global or local")
    if kind != "local":
        return
    problem = config.env.requirement_problem(LOCAL_CKPT_PACKAGE)
    if problem:
        config.error(f"--non-persistent-ckpt-type local {problem}",
                     flags=("non_persistent_ckpt_type",),
                     hint="install nvidia-resiliency-ext, or use --non-persistent-ckpt-type global")
    if config.non_persistent_local_ckpt_dir is None:
        config.error("--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir",
                     flags=("non_persistent_ckpt_type", "non_persistent_local_ckpt_dir"),
                     hint="add --non-persistent-local-ckpt-dir DIR on node-local storage")


def check_checkpoint_args_source(config: Draft) -> None:
    """--use-checkpoint-args reads a checkpoint, so one must be named.

    Every line asks before validate_args: ``initialize_megatron`` up to 0.17, then
    ``parse_and_validate_args``, which loads the checkpoint's arguments."""
    if not config.use_checkpoint_args:
        return
    if config.load is None and config.pretrained_checkpoint is None:
        config.error("--use-checkpoint-args needs --load or --pretrained-checkpoint",
                     flags=("use_checkpoint_args", "load", "pretrained_checkpoint"),
                     hint="add --load DIR with the checkpoint whose arguments to use")
    if config.non_persistent_ckpt_type == "local":
        config.error("--use-checkpoint-args cannot be used with --non-persistent-ckpt-type local",
                     flags=("use_checkpoint_args", "non_persistent_ckpt_type"),
                     hint="local checkpoints need every argument before they load; use "
                          "--non-persistent-ckpt-type global or drop --use-checkpoint-args")


def check_save_interval(config: Draft) -> None:
    """Saving needs a positive interval; retention works on multiples of it."""
    if config.save is None:
        return
    interval = config.save_interval
    if interval is None or interval <= 0:
        shown = "is missing" if interval is None else f"is {interval}"
        config.error(f"--save needs a positive --save-interval (it {shown})",
                     flags=("save", "save_interval"), hint="add e.g. --save-interval 1000")
        return
    retain = config.save_retain_interval
    if retain is None:
        return
    if retain <= 0 or retain % interval:
        config.error(f"--save-retain-interval {retain} must be a positive multiple of "
                     f"--save-interval {interval}",
                     flags=("save_retain_interval", "save_interval"),
                     hint="use e.g. --save-retain-interval "
                          f"{interval * max(1, retain // interval)}")


def check_torch_dcp(config: Draft) -> None:
    """The ``torch_dcp`` format does not support model parallelism (the FSDP plugin, whose
    Torch FSDP2 is the only tested user of the format, requires that too)."""
    if config.ckpt_format != "torch_dcp":
        return
    for dest in ("tensor_model_parallel_size", "pipeline_model_parallel_size"):
        size = config.get(dest, 1)
        if size > 1:
            spelled = config.spelling(dest)
            config.error(f"--ckpt-format torch_dcp is not supported with {spelled} {size}",
                         flags=("ckpt_format", dest),
                         hint=f"use --ckpt-format torch_dist, or {spelled} 1")


def check_emerging_optimizer_format(config: Draft) -> None:
    """Emerging optimizers (Muon, Lion, SOAP, ...) save only in the torch and torch_dist formats."""
    optimizer = config.get("optimizer", "adam")
    fmt = config.ckpt_format
    if optimizer not in STANDARD_OPTIMIZERS and fmt not in EMERGING_OPTIMIZER_FORMATS:
        config.error(f"--optimizer {optimizer} cannot save in --ckpt-format {fmt}",
                     flags=("ckpt_format", "optimizer"), hint="use --ckpt-format torch_dist")


def check_pg_cache_groups(config: Draft) -> None:
    """The tensor-distribution cache is keyed by group, so save and load must share one."""
    if config.ckpt_pg_tensors_cache_path is None:
        return
    save = config.ckpt_fully_parallel_save_process_group
    load = config.ckpt_fully_parallel_load_process_group
    if save != load:
        config.error(
            f"--ckpt-pg-tensors-cache-path needs the same save and load process group, got "
            f"--ckpt-fully-parallel-save-process-group {save} and "
            f"--ckpt-fully-parallel-load-process-group {load}",
            flags=("ckpt_pg_tensors_cache_path", "ckpt_fully_parallel_save_process_group",
                   "ckpt_fully_parallel_load_process_group"),
            hint=f"set both to {save} (or both to {load})")


def check_override_iteration(config: Draft) -> None:
    """Fine-tuning restarts at iteration zero, which contradicts a forced iteration."""
    if config.override_ckpt_iteration is not None and config.finetune:
        config.error("--override-ckpt-iteration cannot be used with --finetune",
                     flags=("override_ckpt_iteration", "finetune"), hint="drop one of them")


def check_replication(config: Draft) -> None:
    """Replicas of local checkpoints need a rank distance and local checkpoints to copy."""
    if not config.replication:
        return
    if config.replication_jump is None:
        config.error("--replication needs --replication-jump",
                     flags=("replication", "replication_jump"),
                     hint="add --replication-jump N (ranks between a node and its replica)")
    kind = config.non_persistent_ckpt_type
    if kind != "local":
        config.error(f"--replication needs --non-persistent-ckpt-type local (got {kind})",
                     flags=("replication", "non_persistent_ckpt_type"),
                     hint="add --non-persistent-ckpt-type local")


def warn_deprecated_and_risky(config: Draft) -> None:
    """Say which flags are ignored, and which combinations make resuming hard."""
    for dest in ("ckpt_fully_parallel_save_deprecated", "use_dist_ckpt_deprecated",
                 "dist_ckpt_format_deprecated"):
        if config[dest]:
            config.warn(f"{config.spelling(dest)} is deprecated and has no effect", flags=(dest,))
    if (config.use_dist_ckpt and not config.ckpt_fully_parallel_save
            and config.get("use_distributed_optimizer")):
        config.warn("with --no-ckpt-fully-parallel-save and the distributed optimizer, training "
                    "cannot resume with a different parallelism",
                    flags=("ckpt_fully_parallel_save",))
    if (config.use_dist_ckpt and config.ckpt_fully_parallel_load
            and config.ckpt_fully_parallel_load_exchange_algo != "broadcast"):
        config.warn("only the broadcast exchange algorithm is numerically reliable for fully "
                    "parallel loads", flags=("ckpt_fully_parallel_load_exchange_algo",))


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_conversion_inputs,
    check_non_persistent_type,
    check_checkpoint_args_source,
    check_save_interval,
    check_torch_dcp,
    check_emerging_optimizer_format,
    check_pg_cache_groups,
    check_override_iteration,
    check_replication,
    warn_deprecated_and_risky,
)
