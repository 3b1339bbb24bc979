"""Checks on what gets logged and where."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_TENSORBOARD_EXTRAS = ("log_timers_to_tensorboard", "log_validation_ppl_to_tensorboard",
                       "log_memory_to_tensorboard", "log_world_size_to_tensorboard")


def check_max_attention_logit(config: Draft) -> None:
    """Logging the largest attention logit relies on Transformer Engine 2.9."""
    if not config.log_max_attention_logit:
        return
    problem = config.env.requirement_problem("transformer_engine", "2.9.0")
    if problem:
        config.error(f"--log-max-attention-logit {problem}", flags=("log_max_attention_logit",),
                     hint="upgrade Transformer Engine to 2.9 or newer, or drop the flag")


def warn_unused_settings(config: Draft) -> None:
    """Settings that only matter together with a switch that is off."""
    pairs = (
        ("validation_set_names", "multiple_validation_sets"),
        ("otel_service_name", "otel_enabled"),
        ("otel_span_groups", "otel_enabled"),
    )
    for setting, switch in pairs:
        if config[setting] is not None and not config[switch]:
            config.warn(f"{config.spelling(setting)} has no effect without "
                        f"{config.spelling(switch)}", flags=(setting, switch))
    asked = [dest for dest in _TENSORBOARD_EXTRAS if config[dest]]
    if asked and config.tensorboard_dir is None:
        spelled = ", ".join(config.spelling(d) for d in asked)
        config.warn(f"{spelled} has no effect without --tensorboard-dir",
                    flags=(*asked, "tensorboard_dir"))


def check_memory_log_interval(config: Draft) -> None:
    """The memory log interval is a multiple of the log interval.

    Memory is logged on logging iterations only: its interval is a multiple of
    --log-interval (the flag exists from Megatron 0.16 on)."""
    every, log_every = config.get("log_memory_interval"), config.log_interval
    if every is not None and log_every and every % log_every:
        config.error(f"--log-memory-interval {every} must be a multiple of --log-interval "
                     f"{log_every}", flags=("log_memory_interval", "log_interval"),
                     hint=f"use a multiple of {log_every}, such as {log_every * max(1, every // log_every)}")


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_max_attention_logit,
    check_memory_log_interval,
    warn_unused_settings,
)
