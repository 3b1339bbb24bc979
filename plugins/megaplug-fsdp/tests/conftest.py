"""Fixtures for the fsdp plugin tests: a kernel with the fsdp plugin and a stand-in host.

The stand-in plays the built-in plugins whose settings FSDP reads, with Megatron's
defaults, so these tests do not depend on how the built-ins are written.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug
import megaplug_fsdp
from megaplug import PluginInfo, TargetEnvironment, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
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


class Host:
    """Stands in for the built-in plugins FSDP talks to (named 'training' for ordering)."""

    megaplug_plugin = PluginInfo(name="training", description="Stand-in host.")

    @hookimpl
    def add_args(self, flags):
        for options, kwargs in HOST_FLAGS:
            flags.add_argument(*options, **kwargs)

    @hookimpl
    def derive(self, config):
        # Like Megatron, freezing every layer turns the distributed optimizer back off; this
        # must happen after FSDP's own derivations.
        if config.freeze_all_layers and config.use_distributed_optimizer:
            config.set("use_distributed_optimizer", False, inputs=("freeze_all_layers",))


#: Capability and packages of a typical Hopper target.
HOPPER = dict(packages={"transformer_engine": "2.17.1", "torch": "2.13.0"},
              device_capability=(9, 0))


@pytest.fixture
def make_kernel() -> Callable[..., Kernel]:
    """Build a kernel of the host stand-in and the fsdp plugin, blocking the given names."""

    def build(block: tuple[str, ...] = ()) -> Kernel:
        selection = PluginSelection(autoload=False, block=set(block))
        return Kernel(PluginSet(selection, builtins=[Host(), megaplug_fsdp]))

    return build


@pytest.fixture
def kernel(make_kernel: Callable[..., Kernel]) -> Kernel:
    """A kernel with the host stand-in and the fsdp plugin only."""
    return make_kernel()


@pytest.fixture
def resolve(kernel: Kernel) -> Callable[..., megaplug.Resolved]:
    """Resolve a command line on a Hopper target; ``env=`` gives environment variables."""

    def run(*argv: str, env: dict[str, str] | None = None, **target: Any) -> megaplug.Resolved:
        settings = {**HOPPER, **target}
        return kernel.resolve(list(argv), environ=env or {},
                              target=TargetEnvironment(environ=env or {}, **settings))

    return run


@pytest.fixture
def problems(resolve: Callable[..., megaplug.Resolved]) -> Callable[..., list[str]]:
    """The fsdp plugin's problem messages for a command line (empty when it resolves)."""

    def run(*argv: str, **kwargs: Any) -> list[str]:
        try:
            resolve(*argv, **kwargs)
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems if p.plugin == "fsdp"]
        return []

    return run
