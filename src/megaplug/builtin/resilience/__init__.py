"""The resilience plugin: autoresume, in-process restart, fault tolerance, straggler
detection, workload inspector, fault injection and the multi-storage client (MSC)."""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import restart, storage

megaplug_plugin = PluginInfo(
    name="resilience",
    description="Autoresume, in-process restart, fault tolerance, straggler detection, "
                "fault injection and the multi-storage client.",
    rules=Rules(
        # the deprecated --disable-msc; the active world size defaults to WORLD_SIZE
        normalize=(storage.apply_disable_msc, restart.default_active_world_size),
        validate=(storage.check_msc_installed, restart.warn_missing_resiliency_ext,
                  restart.warn_inprocess_settings, restart.warn_ft_timeouts_without_package)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the resilience flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import ResilienceOptions

    flags.add_options(ResilienceOptions)
