"""The resilience plugin: autoresume, in-process restart, fault tolerance, straggler
detection, workload inspector, fault injection and the multi-storage client (MSC)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from megaplug import Draft, PluginInfo, hookimpl

from . import restart, storage
from .options import ResilienceOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="resilience",
    description="Autoresume, in-process restart, fault tolerance, straggler detection, "
                "fault injection and the multi-storage client.",
)

CHECKS: tuple[Callable[[Draft], None], ...] = (
    storage.check_msc_installed,
    restart.warn_missing_resiliency_ext,
    restart.warn_inprocess_settings,
    restart.warn_ft_timeouts_without_package,
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the resilience flags."""
    flags.add_options(ResilienceOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Apply the deprecated --disable-msc; default the active world size to WORLD_SIZE."""
    storage.apply_disable_msc(config)
    restart.default_active_world_size(config)


@hookimpl
def validate(config: Draft) -> None:
    """Run every resilience check."""
    for check in CHECKS:
        check(config)
