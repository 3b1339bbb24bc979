"""Fixtures for the fsdp plugin tests: the fsdp plugin and a stand-in host.

The stand-in plays the built-in plugins whose settings FSDP reads, with Megatron's
defaults, so these tests do not depend on how the built-ins are written. megaplug's pytest
plugin (``resolve``, ``problems``) resolves with this set, for a Hopper target with
Transformer Engine 2.17.1 unless a test says otherwise.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug_fsdp
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.testing import stand_in

HOST_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--tensor-model-parallel-size",), {"type": int, "default": 1}),
    (("--pipeline-model-parallel-size",), {"type": int, "default": 1}),
    (("--context-parallel-size",), {"type": int, "default": 1}),
    (("--expert-model-parallel-size",), {"type": int, "default": 1}),
    (("--no-gradient-accumulation-fusion",),
     {"action": "store_false", "dest": "gradient_accumulation_fusion"}),
    (("--ckpt-format",), {"default": "torch_dist",
                          "choices": ["torch", "torch_dist", "torch_dcp", "fsdp_dtensor"]}),
    (("--untie-embeddings-and-output-weights",), {"action": "store_true"}),
    (("--fp16",), {"action": "store_true"}),
    (("--use-distributed-optimizer",), {"action": "store_true"}),
    (("--optimizer",), {"default": "adam"}),
    (("--use-nccl-ub",), {"action": "store_true", "dest": "nccl_ub"}),
    (("--init-model-with-meta-device",), {"action": "store_true"}),
    (("--check-weight-hash-across-dp-replicas-interval",), {"type": int, "default": None}),
    (("--fp8-param-gather",), {"action": "store_true"}),
    (("--fp4-param-gather",), {"action": "store_true"}),
    (("--reuse-grad-buf-for-mxfp8-param-ag",), {"action": "store_true"}),
    (("--moe-single-grouped-weight",), {"action": "store_true"}),
    (("--moe-single-grouped-bias",), {"action": "store_true"}),
    (("--high-priority-stream-groups",), {"nargs": "+", "default": []}),
    (("--freeze-all-layers",), {"action": "store_true"}),
]


def turn_distributed_optimizer_off_when_frozen(config: Any) -> None:
    """Like Megatron, freezing every layer turns the distributed optimizer back off; this
    must happen after FSDP's own derivations."""
    if config.freeze_all_layers and config.use_distributed_optimizer:
        config.set("use_distributed_optimizer", False, inputs=("freeze_all_layers",))


#: Stands in for the built-in plugins FSDP talks to (named 'training' for ordering).
HOST = stand_in("training", *HOST_FLAGS, derive=[turn_distributed_optimizer_off_when_frozen])

#: Capability and packages of a typical Hopper target.
HOPPER = dict(packages={"transformer_engine": "2.17.1", "torch": "2.13.0"},
              device_capability=(9, 0))


@pytest.fixture
def megaplug_plugins() -> list[object]:
    return [HOST, megaplug_fsdp]


@pytest.fixture
def megaplug_reporter() -> str:
    return "fsdp"


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    """Build a kernel of the host stand-in and the fsdp plugin, blocking the given names."""

    def build(block: tuple[str, ...] = ()) -> Kernel:
        selection = PluginSelection(autoload=False, block=set(block))
        return Kernel(PluginSet(selection, builtins=[HOST, megaplug_fsdp]))

    return build


@pytest.fixture
def kernel(megaplug_kernel: Kernel) -> Kernel:
    """A kernel with the host stand-in and the fsdp plugin only."""
    return megaplug_kernel


@pytest.fixture
def resolve(resolve: Callable[..., Any]) -> Callable[..., Any]:
    """megaplug's ``resolve`` on a Hopper target; ``env=`` gives environment variables."""

    def run(*argv: str, env: dict[str, str] | None = None, **target: Any) -> Any:
        settings = {**HOPPER, **target}
        return resolve(*argv, environ=env, capability=settings.pop("device_capability"),
                       **settings)

    return run
