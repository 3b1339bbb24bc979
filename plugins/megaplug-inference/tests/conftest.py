"""Fixtures for the inference plugin tests: the plugin and a stand-in host.

The stand-in plays the training plugin (owner of --cuda-graph-impl and the module list,
from which it drops retired spellings during normalize) and the parallel plugin, with
Megatron's defaults. megaplug's pytest plugin (``resolve``, ``problems``) resolves with this
set, for a Hopper GPU.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug_inference
from megaplug import Rules
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.testing import stand_in


def drop_retired_modules(config: Any) -> None:
    """Like the training plugin: retired spellings leave the module list (the inference
    plugin reads them from what was given)."""
    modules = config.cuda_graph_modules
    kept = [m for m in modules if m not in ("full_iteration", "full_iteration_inference")]
    if kept != modules:
        config.set("cuda_graph_modules", kept, inputs=("cuda_graph_modules",))


#: Stands in for the training and parallel plugins.
HOST = stand_in(
    "training",
    ("--cuda-graph-impl", {"default": "none",
                           "choices": ["none", "local", "transformer_engine", "full_iteration"]}),
    ("--cuda-graph-modules", {"nargs": "+", "default": []}),
    ("--pipeline-model-parallel-size", {"type": int, "default": 1}),
    ("--fp8-format", {"dest": "fp8", "default": None}),
    ("--fp8-recipe", {"default": "delayed"}),
    ("--transformer-impl", {"default": "transformer_engine"}),
    rules=Rules(normalize=(drop_retired_modules,)))


@pytest.fixture
def megaplug_plugins() -> list[object]:
    return [HOST, megaplug_inference]


@pytest.fixture
def megaplug_reporter() -> str:
    return "inference"


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    """Build a kernel of the stand-in host and the inference plugin, blocking the given names."""

    def build(block: tuple[str, ...] = ()) -> Kernel:
        selection = PluginSelection(autoload=False, block=set(block))
        return Kernel(PluginSet(selection, builtins=[HOST, megaplug_inference]))

    return build


@pytest.fixture
def kernel(megaplug_kernel: Kernel) -> Kernel:
    return megaplug_kernel
