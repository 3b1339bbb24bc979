"""Shared helpers of the data, logging and resilience plugin tests.

The plugins are tested on their own: a small stand-in plugin (named ``parallel`` so the
data plugin's ordering holds) declares the handful of other plugins' settings they read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import pytest
from typing_extensions import Annotated

import megaplug
from megaplug import Computed, ConfigError, FromEnv, PluginInfo, Problem, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.builtin import data, logging, resilience

#: A minimal launch the three plugins accept.
BASE = ["--seq-length", "128", "--micro-batch-size", "2", "--max-position-embeddings", "128"]


@dataclass
class _NeighbourOptions:
    micro_batch_size: Optional[int] = None
    max_position_embeddings: Optional[int] = None
    tensor_model_parallel_size: int = 1
    context_parallel_size: int = 1
    dynamic_context_parallel: bool = False
    calculate_per_token_loss: bool = False
    cuda_graph_impl: str = "none"
    step_batch_size_schedule: Optional[str] = None
    world_size: Annotated[int, FromEnv("WORLD_SIZE")] = 1
    data_parallel_size: Annotated[Optional[int], Computed("world / (tp x cp)")] = None


class Neighbours:
    """Stands in for the parallel and training plugins."""

    megaplug_plugin = PluginInfo(name="parallel", description="test stand-in")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_options(_NeighbourOptions)

    @hookimpl
    def derive(self, config: megaplug.Draft) -> None:
        replicas = config.world_size // (config.tensor_model_parallel_size
                                         * config.context_parallel_size)
        config.set("data_parallel_size", replicas)


_KERNEL: Kernel | None = None


def kernel() -> Kernel:
    """A kernel of the three plugins under test and the stand-in, built once."""
    global _KERNEL
    if _KERNEL is None:
        plugins = [data, logging, resilience, Neighbours()]
        _KERNEL = Kernel(PluginSet(PluginSelection(autoload=False), builtins=plugins))
    return _KERNEL


def resolve(argv: Sequence[str] = (), *, environ: Mapping[str, str] | None = None,
            packages: Mapping[str, str | None] | None = None,
            defaults: Mapping[str, Any] | None = None, base: bool = True) -> megaplug.Resolved:
    """Resolve ``BASE + argv`` against a target with only the given packages installed."""
    env = dict(environ or {})
    target = megaplug.TargetEnvironment(
        packages={"multistorageclient": None, "nvidia_resiliency_ext": None,
                  "transformer_engine": None, **(packages or {})},
        device_capability=(9, 0), environ=env)
    tokens = [*BASE, *argv] if base else list(argv)
    return kernel().resolve(tokens, environ=env, target=target, defaults=defaults)


def problems(argv: Sequence[str] = (), **kwargs: Any) -> list[Problem]:
    """The problems of a resolve that must fail."""
    with pytest.raises(ConfigError) as info:
        resolve(argv, **kwargs)
    return list(info.value.problems)


def messages(argv: Sequence[str] = (), **kwargs: Any) -> list[str]:
    return [str(p) for p in problems(argv, **kwargs)]


def warnings_of(resolved: megaplug.Resolved) -> list[str]:
    return [str(w) for w in resolved.warnings]
