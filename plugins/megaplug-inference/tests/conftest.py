"""Fixtures for the inference plugin tests: a kernel with the plugin and a stand-in host.

The stand-in plays the training plugin (owner of --cuda-graph-impl and the module list,
from which it drops retired spellings during normalize) and the parallel plugin, with
Megatron's defaults.
"""

from __future__ import annotations

from typing import Callable

import pytest

import megaplug
import megaplug_inference
from megaplug import PluginInfo, TargetEnvironment, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
class Host:
    """Stands in for the training and parallel plugins."""

    megaplug_plugin = PluginInfo(name="training", description="Stand-in host.")

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--cuda-graph-impl", default="none",
                           choices=["none", "local", "transformer_engine", "full_iteration"])
        flags.add_argument("--cuda-graph-modules", nargs="+", default=[])
        flags.add_argument("--pipeline-model-parallel-size", type=int, default=1)
        flags.add_argument("--fp8-format", dest="fp8", default=None)
        flags.add_argument("--fp8-recipe", default="delayed")
        flags.add_argument("--transformer-impl", default="transformer_engine")

    @hookimpl
    def normalize(self, config):
        # Like the training plugin: retired spellings leave the module list (the inference
        # plugin reads them from what was given).
        modules = config.cuda_graph_modules
        kept = [m for m in modules if m not in ("full_iteration", "full_iteration_inference")]
        if kept != modules:
            config.set("cuda_graph_modules", kept, inputs=("cuda_graph_modules",))


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    """Build a kernel of the stand-in host and the inference plugin, blocking the given names."""

    def build(block: tuple[str, ...] = ()) -> Kernel:
        selection = PluginSelection(autoload=False, block=set(block))
        return Kernel(PluginSet(selection, builtins=[Host(), megaplug_inference]))

    return build


@pytest.fixture
def kernel(make_kernel: Callable[..., Kernel]) -> Kernel:
    return make_kernel()


@pytest.fixture
def resolve(kernel: Kernel) -> Callable[..., megaplug.Resolved]:
    """Resolve a command line on a Hopper target."""

    def run(*argv: str) -> megaplug.Resolved:
        return kernel.resolve(list(argv), environ={},
                              target=TargetEnvironment(device_capability=(9, 0), environ={}))

    return run


@pytest.fixture
def problems(resolve: Callable[..., megaplug.Resolved]) -> Callable[..., list[str]]:
    """The inference plugin's problem messages for a command line (empty when it resolves)."""

    def run(*argv: str) -> list[str]:
        try:
            resolve(*argv)
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems if p.plugin == "inference"]
        return []

    return run


