"""Stand-ins for the settings other plugins own, so the gtp hooks are tested alone."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug
import megaplug_gtp
from megaplug import Computed, FromEnv, PluginInfo, hookimpl

FOREIGN_FLAGS: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("--tensor-model-parallel-size",), {"type": int, "default": 1}),
    (("--expert-tensor-parallel-size",), {"type": int, "default": None}),
    (("--context-parallel-size",), {"type": int, "default": 1}),
    (("--sequence-parallel",), {"action": "store_true"}),
    (("--use-torch-fsdp2",), {"action": "store_true"}),
    (("--use-megatron-fsdp",), {"action": "store_true"}),
    (("--use-tp-pp-dp-mapping",), {"action": "store_true"}),
    (("--ddp-average-in-collective",), {"action": "store_true"}),
    (("--disable-symmetric-registration",), {"action": "store_true"}),
    (("--high-priority-stream-groups",), {"nargs": "*", "type": str, "default": []}),
    (("--cuda-graph-impl",), {"type": str, "default": "none"}),
    (("--ckpt-format",), {"type": str, "default": "torch_dist"}),
    (("--bf16",), {"action": "store_true"}),
    (("--grad-reduce-in-bf16",), {"action": "store_true"}),
    (("--accumulate-allreduce-grads-in-fp32",), {"action": "store_true"}),
    (("--main-grads-dtype",), {"type": str, "default": "fp32"}),
    (("--fp4-format",), {"dest": "fp4", "type": str, "default": None}),
    (("--fp4-param-gather",), {"action": "store_true"}),
    (("--fp8-recipe",), {"type": str, "default": "delayed"}),
    (("--fp8-param-gather",), {"action": "store_true"}),
    (("--reuse-grad-buf-for-mxfp8-param-ag",), {"action": "store_true"}),
    (("--dist-ckpt-optim-fully-reshardable",), {"action": "store_true"}),
    (("--distrib-optim-fully-reshardable-mem-efficient",), {"action": "store_true"}),
]


class _Parallel:
    """Declares the foreign flags and derives the data-parallel size as the parallel plugin
    does: the world over one model-parallel group (GTP takes its remat ranks out after)."""

    megaplug_plugin = PluginInfo(name="parallel")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        for options, kwargs in FOREIGN_FLAGS:
            flags.add_argument(*options, **kwargs)
        flags.add_options(_ParallelComputed)

    @hookimpl
    def derive(self, config: Any) -> None:
        group = config.tensor_model_parallel_size * config.context_parallel_size
        config.set("data_parallel_size", config.world_size // group)


class _Precision:
    """Plays the precision plugin: bf16 training accumulates gradients in fp32."""

    megaplug_plugin = PluginInfo(name="precision")

    @hookimpl
    def derive(self, config: Any) -> None:
        if config.bf16 and not config.grad_reduce_in_bf16:
            config.set("accumulate_allreduce_grads_in_fp32", True, inputs=("bf16",))


from dataclasses import dataclass  # noqa: E402

from typing_extensions import Annotated  # noqa: E402


@dataclass
class _ParallelComputed:
    world_size: Annotated[int, FromEnv("WORLD_SIZE")] = 1
    data_parallel_size: Annotated[int, Computed()] = 1


KERNEL, _ = megaplug.load(builtins=[_Parallel(), _Precision(), megaplug_gtp],
                          environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})


@pytest.fixture
def resolve() -> Callable[..., megaplug.Resolved]:
    """Resolve argv with the gtp plugin and the stand-ins (Hopper, 8 ranks, unless told)."""

    def run(*argv: str, capability: Any = (9, 0), env: dict[str, str] | None = None,
            ) -> megaplug.Resolved:
        environ = {"WORLD_SIZE": "8", **(env or {})}
        target = megaplug.TargetEnvironment(device_capability=capability, environ=environ)
        return KERNEL.resolve(list(argv), environ=environ, target=target)

    return run


@pytest.fixture
def problems(resolve: Callable[..., megaplug.Resolved]) -> Callable[..., list[str]]:
    """The gtp plugin's problem messages for argv (empty when it resolves)."""

    def run(*argv: str, **kwargs: Any) -> list[str]:
        try:
            resolve(*argv, **kwargs)
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems if p.plugin == "gtp"]
        return []

    return run
