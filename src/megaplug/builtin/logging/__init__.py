"""The logging plugin: logging, TensorBoard and W&B, timers, validation, one logger and
OpenTelemetry.

Evaluation batch sizes default to the training ones, so this plugin runs after
``training``, which derives the global batch size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from megaplug import Draft, PluginInfo, hookimpl

from . import evaluation, outputs
from .options import LoggingOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="logging",
    description="Logging, TensorBoard and W&B, timers, validation, one logger and "
                "OpenTelemetry.",
    after=("training",),
)

CHECKS: tuple[Callable[[Draft], None], ...] = (
    evaluation.check_eval_batch_divisible,
    outputs.check_max_attention_logit,
    outputs.warn_unused_settings,
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the logging, validation and telemetry flags."""
    flags.add_options(LoggingOptions)


@hookimpl
def derive(config: Draft) -> None:
    """Default the evaluation batch sizes; evaluation-only runs skip the optimizer state."""
    evaluation.default_eval_batch_sizes(config)
    evaluation.skip_optimizer_state_when_not_training(config)


@hookimpl
def validate(config: Draft) -> None:
    """Run every logging and validation check."""
    for check in CHECKS:
        check(config)
