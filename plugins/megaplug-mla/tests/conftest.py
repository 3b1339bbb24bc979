"""Stand-ins for the settings other plugins own, so the mla hooks are tested alone."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug
import megaplug_mla
from megaplug import PluginInfo, hookimpl


class _Experimental:
    megaplug_plugin = PluginInfo(name="experimental")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_argument("--hybrid-layer-pattern", type=str, default=None)
        flags.add_argument("--group-query-attention", action="store_true")
        flags.add_argument("--mtp-num-layers", type=int, default=None)
        flags.add_argument("--mtp-hybrid-override-pattern", type=str, default=None)


KERNEL, _ = megaplug.load(builtins=[_Experimental(), megaplug_mla],
                          environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def resolve() -> Callable[..., megaplug.Resolved]:
    """Resolve argv with the mla plugin and the stand-ins."""

    def run(*argv: str) -> megaplug.Resolved:
        return KERNEL.resolve(list(argv), environ={})

    return run


@pytest.fixture
def problems(resolve: Callable[..., megaplug.Resolved]) -> Callable[..., list[str]]:
    """The mla plugin's problem messages for argv (empty when it resolves)."""

    def run(*argv: str) -> list[str]:
        try:
            resolve(*argv)
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems if p.plugin == "mla"]
        return []

    return run
