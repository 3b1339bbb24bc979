"""The moe plugin alone, with stand-ins for the settings other plugins own: megaplug's pytest
plugin (``resolve``, ``problems``, ``megaplug_kernel``) resolves with this set, for a Hopper GPU
unless a test passes ``capability=``."""

from __future__ import annotations

from typing import Any

import pytest

import megaplug_moe
from megaplug.testing import stand_in

FOREIGN_FLAGS: list[tuple[str, dict[str, Any]]] = [
    ("--tensor-model-parallel-size", {"type": int, "default": 1}),
    ("--context-parallel-size", {"type": int, "default": 1}),
    ("--use-torch-fsdp2", {"action": "store_true"}),
    ("--use-megatron-fsdp", {"action": "store_true"}),
    ("--cuda-graph-impl", {"type": str, "default": "none"}),
    ("--inference-cuda-graph-scope", {"type": str, "default": "none"}),
    # settings of the seed's newer Megatron that no plugin declares yet
    ("--moe-shortcut-connection", {"action": "store_true"}),
    ("--moe-megakernel-backend", {"type": str, "default": None}),
    ("--moe-use-norm-before-up-proj", {"action": "store_true"}),
]


def derive_ffn_hidden_size(config: Any) -> None:
    """The model plugin's derivation the moe plugin reads: four times the hidden size."""
    if config.ffn_hidden_size is None:
        config.set("ffn_hidden_size", 4 * config.hidden_size)


PLUGINS = [
    stand_in("model", ("--hidden-size", {"type": int, "default": 64}),
             ("--ffn-hidden-size", {"type": int, "default": None}),
             derive=[derive_ffn_hidden_size]),
    stand_in("parallel", *FOREIGN_FLAGS),
    stand_in("checkpointing", ("--save", {"type": str, "default": None}),
             ("--no-load-optim", {"action": "store_true", "default": None}),
             ("--no-load-rng", {"action": "store_true", "default": None})),
    megaplug_moe,
]


@pytest.fixture
def megaplug_plugins() -> list[object]:
    return PLUGINS


@pytest.fixture
def megaplug_reporter() -> str:
    return "moe"


@pytest.fixture
def kernel(megaplug_kernel: Any) -> Any:
    """The kernel with the moe plugin and the stand-ins."""
    return megaplug_kernel
