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


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_max_attention_logit,
    warn_unused_settings,
)
