"""Training length and schedules: iterations versus samples, learning rate, weight decay."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def derive_weight_decay_range(config: Draft) -> None:
    """A constant weight-decay schedule starts and ends at --weight-decay."""
    if config.weight_decay_incr_style != "constant":
        return
    if config.start_weight_decay is not None or config.end_weight_decay is not None:
        return  # reported by check_weight_decay_range
    for dest in ("start_weight_decay", "end_weight_decay"):
        config.set(dest, config.weight_decay, reason="constant weight-decay schedule",
                   inputs=("weight_decay", "weight_decay_incr_style"))


def check_weight_decay_range(config: Draft) -> None:
    """Start/end weight decay go with a varying schedule, and only with one."""
    style = config.weight_decay_incr_style
    start_given = config.given("start_weight_decay")
    end_given = config.given("end_weight_decay")
    if style == "constant":
        given = [f for f, g in (("--start-weight-decay", start_given),
                                ("--end-weight-decay", end_given)) if g]
        if given:
            verb = "need" if len(given) > 1 else "needs"
            config.error(f"{' and '.join(given)} {verb} a varying weight-decay schedule, but "
                         "--weight-decay-incr-style is constant",
                         flags=(*given, "weight_decay_incr_style"),
                         hint="use --weight-decay for a constant decay, or set "
                              "--weight-decay-incr-style linear or cosine")
        return
    missing = [f for f, v in (("--start-weight-decay", config.start_weight_decay),
                              ("--end-weight-decay", config.end_weight_decay)) if v is None]
    if missing:
        config.error(f"--weight-decay-incr-style {style} needs {' and '.join(missing)}",
                     flags=("weight_decay_incr_style", *missing),
                     hint="give both the start and the end weight decay")


def _check_counted_in(config: Draft, unit: str, other: str, mode: str, other_mode: str) -> None:
    """When training length is given in ``unit`` (iters / samples), every length-like
    setting must be counted in it too (unless --skip-train leaves the schedule unused: from
    Megatron 0.17)."""
    if not config[f"train_{unit}"] or _schedule_unused(config):
        return
    conflicts = []
    # --train-iters with --train-samples is one mistake: the iteration check names the pair
    if config[f"train_{other}"] is not None and not (unit == "samples" and config.train_iters):
        conflicts.append(f"--train-{other}")
    if config[f"lr_decay_{other}"] is not None:
        conflicts.append(f"--lr-decay-{other}")
    if config[f"lr_warmup_{other}"]:
        conflicts.append(f"--lr-warmup-{other}")
    if conflicts:
        config.error(f"--train-{unit} sets {mode}-based training, which cannot be combined "
                     f"with {', '.join(conflicts)}",
                     flags=(f"train_{unit}", *conflicts),
                     hint=f"count everything in {mode}s (--lr-decay-{unit}, --lr-warmup-{unit}), "
                          f"or train by {other_mode}s with --train-{other} instead")
    if config.lr_warmup_fraction is not None and config[f"lr_warmup_{unit}"]:
        config.error(f"--lr-warmup-fraction and --lr-warmup-{unit} both set the warmup length",
                     flags=("lr_warmup_fraction", f"lr_warmup_{unit}"),
                     hint="keep one of them")


def _schedule_unused(config: Draft) -> bool:
    """--skip-train leaves the training schedule unchecked from Megatron 0.17 on."""
    return bool(config.get("skip_train", False)) and config.env.megatron.at_least("0.17.0")


def check_no_rampup_with_iterations(config: Draft) -> None:
    """Megatron before 0.18 refuses a batch-size rampup under iteration-based training."""
    env = config.env
    if not env.megatron.before("0.18.0") or not config.train_iters \
            or _schedule_unused(config) or config.get("rampup_batch_size") is None:
        return
    config.error(f"--rampup-batch-size is not supported with iteration-based training "
                 f"(--train-iters) in Megatron {env.release_line('megatron_core')}",
                 flags=("rampup_batch_size", "train_iters"),
                 hint="train by samples (--train-samples), or drop --rampup-batch-size "
                      "(Megatron 0.18 and later take both)")


def check_iteration_based(config: Draft) -> None:
    """With --train-iters, lengths are counted in iterations (Megatron lets a batch-size
    rampup, which is counted in samples, run under iteration-based training)."""
    _check_counted_in(config, "iters", "samples", "iteration", "sample")


def check_sample_based(config: Draft) -> None:
    """With --train-samples, lengths are counted in samples."""
    _check_counted_in(config, "samples", "iters", "sample", "iteration")


def check_learning_rate_floor(config: Draft) -> None:
    """The learning-rate floor cannot exceed the peak learning rate.

    Written as "not at most" so that a NaN learning rate fails too, as in Megatron.
    """
    lr, min_lr = config.lr, config.min_lr
    if lr is not None and min_lr is not None and not min_lr <= lr:
        relation = "is above" if min_lr > lr else "cannot be compared with"
        config.error(f"--min-lr {min_lr} {relation} --lr {lr}", flags=("min_lr", "lr"),
                     hint=f"use a --min-lr of at most {lr}")


def check_scheduler_source(config: Draft) -> None:
    """The scheduler refuses to both override and reuse the checkpoint's settings (at start-up)."""
    if config.override_opt_param_scheduler and config.use_checkpoint_opt_param_scheduler:
        config.warn("--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler "
                    "are both set; the scheduler will refuse this when it is built",
                    flags=("override_opt_param_scheduler", "use_checkpoint_opt_param_scheduler"))


DERIVE: tuple[Callable[[Draft], None], ...] = (derive_weight_decay_range,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_iteration_based,
    check_no_rampup_with_iterations,
    check_sample_based,
    check_learning_rate_floor,
    check_weight_decay_range,
    check_scheduler_source,
)
