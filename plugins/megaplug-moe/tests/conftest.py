"""Stand-ins for the settings other plugins own, so the moe hooks are tested alone."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug
import megaplug_moe
from megaplug import PluginInfo, hookimpl

FOREIGN_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--tensor-model-parallel-size",), {"type": int, "default": 1}),
    (("--context-parallel-size",), {"type": int, "default": 1}),
    (("--use-torch-fsdp2",), {"action": "store_true"}),
    (("--use-megatron-fsdp",), {"action": "store_true"}),
    (("--cuda-graph-impl",), {"type": str, "default": "none"}),
    (("--inference-cuda-graph-scope",), {"type": str, "default": "none"}),
    # settings of the seed's newer Megatron that no plugin declares yet
    (("--moe-shortcut-connection",), {"action": "store_true"}),
    (("--moe-megakernel-backend",), {"type": str, "default": None}),
    (("--moe-use-norm-before-up-proj",), {"action": "store_true"}),
]


class _Checkpointing:
    megaplug_plugin = PluginInfo(name="checkpointing")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_argument("--save", type=str, default=None)
        flags.add_argument("--no-load-optim", action="store_true", default=None)
        flags.add_argument("--no-load-rng", action="store_true", default=None)


class _Parallel:
    megaplug_plugin = PluginInfo(name="parallel")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        for options, kwargs in FOREIGN_FLAGS:
            flags.add_argument(*options, **kwargs)


class _Model:
    megaplug_plugin = PluginInfo(name="model")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_argument("--hidden-size", type=int, default=64)
        flags.add_argument("--ffn-hidden-size", type=int, default=None)

    @hookimpl
    def derive(self, config: Any) -> None:
        if config.ffn_hidden_size is None:
            config.set("ffn_hidden_size", 4 * config.hidden_size)


KERNEL, _ = megaplug.load(builtins=[_Model(), _Parallel(), _Checkpointing(), megaplug_moe],
                          environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
TARGET = {"device_capability": (9, 0)}


@pytest.fixture
def resolve() -> Callable[..., megaplug.Resolved]:
    """Resolve argv with the moe plugin and the stand-ins (Hopper GPU unless told)."""

    def run(*argv: str, capability: Any = (9, 0)) -> megaplug.Resolved:
        target = megaplug.TargetEnvironment(device_capability=capability)
        return KERNEL.resolve(list(argv), environ={}, target=target)

    return run


@pytest.fixture
def problems(resolve: Callable[..., megaplug.Resolved]) -> Callable[..., list[str]]:
    """The moe plugin's problem messages for argv (empty when it resolves)."""

    def run(*argv: str, **kwargs: Any) -> list[str]:
        try:
            resolve(*argv, **kwargs)
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems if p.plugin == "moe"]
        return []

    return run


@pytest.fixture
def kernel() -> object:
    """The kernel with the moe plugin and the stand-ins."""
    return KERNEL
