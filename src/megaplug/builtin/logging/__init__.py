"""The logging plugin: logging, TensorBoard and W&B, timers, validation, one logger and
OpenTelemetry.

The evaluation batch sizes are declared here but derived and checked by the training
plugin, next to the training batch sizes they default to; likewise the checkpointing
plugin turns on --no-load-optim for --skip-train.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

megaplug_plugin = PluginInfo(
    name="logging",
    description="Logging, TensorBoard and W&B, timers, validation, one logger and "
                "OpenTelemetry.",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(validate=(f"{__name__}.outputs:VALIDATE",)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the logging, validation and telemetry flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import LoggingOptions

    flags.add_options(LoggingOptions)
