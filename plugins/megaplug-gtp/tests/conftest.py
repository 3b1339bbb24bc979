"""The gtp plugin alone, with stand-ins for the settings other plugins own: megaplug's pytest
plugin (``resolve``, ``problems``) resolves with this set, for 8 ranks on a Hopper GPU unless
a test says otherwise (``env=``, ``capability=``)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import megaplug_gtp
from megaplug import Computed, FromEnv, options
from megaplug.testing import stand_in

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


@options
class _ParallelComputed:
    world_size: int = FromEnv("WORLD_SIZE", default=1)
    data_parallel_size: int = Computed(default=1)


def derive_data_parallel_size(config: Any) -> None:
    """As the parallel plugin does: the world over one model-parallel group (GTP takes its
    remat ranks out after)."""
    group = config.tensor_model_parallel_size * config.context_parallel_size
    config.set("data_parallel_size", config.world_size // group)


def derive_fp32_accumulation(config: Any) -> None:
    """As the precision plugin does: bf16 training accumulates gradients in fp32."""
    if config.bf16 and not config.grad_reduce_in_bf16:
        config.set("accumulate_allreduce_grads_in_fp32", True, inputs=("bf16",))


PLUGINS = [stand_in("parallel", *FOREIGN_FLAGS, options=_ParallelComputed,
                    derive=[derive_data_parallel_size]),
           stand_in("precision", derive=[derive_fp32_accumulation], after=("parallel",)),
           megaplug_gtp]


@pytest.fixture
def megaplug_plugins() -> list[object]:
    return PLUGINS


@pytest.fixture
def megaplug_reporter() -> str:
    return "gtp"


@pytest.fixture
def resolve(resolve: Callable[..., Any]) -> Callable[..., Any]:
    """megaplug's ``resolve``, with 8 ranks unless ``env=`` says otherwise."""

    def run(*argv: str, env: dict[str, str] | None = None, **kwargs: Any) -> Any:
        return resolve(*argv, environ={"WORLD_SIZE": "8", **(env or {})}, **kwargs)

    return run
