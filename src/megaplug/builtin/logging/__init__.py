"""The logging plugin: logging, TensorBoard and W&B, timers, validation, one logger and
OpenTelemetry.

The evaluation batch sizes are declared here but derived and checked by the training
plugin, next to the training batch sizes they default to; likewise the checkpointing
plugin turns on --no-load-optim for --skip-train.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="logging",
    description="Logging, TensorBoard and W&B, timers, validation, one logger and "
                "OpenTelemetry.",
    options=f"{__name__}.options:LoggingOptions",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(validate=(f"{__name__}.outputs:VALIDATE",)),
)
