"""The resilience plugin: autoresume, in-process restart, fault tolerance, straggler
detection, workload inspector, fault injection and the multi-storage client (MSC)."""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="resilience",
    description="Autoresume, in-process restart, fault tolerance, straggler detection, "
                "fault injection and the multi-storage client.",
    options=f"{__name__}.options:ResilienceOptions",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(
        # the deprecated --disable-msc; the active world size defaults to WORLD_SIZE
        normalize=(f"{__name__}.storage:NORMALIZE", f"{__name__}.restart:NORMALIZE"),
        validate=(f"{__name__}.storage:VALIDATE", f"{__name__}.restart:VALIDATE")),
)
