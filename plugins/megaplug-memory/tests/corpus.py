"""The measured corpus (tests/data/corpus.json), resolved with megaplug: shared by the tests."""

from __future__ import annotations

import json
import os
from functools import lru_cache

DATA = os.path.join(os.path.dirname(__file__), "data", "corpus.json")
GIB = 1 << 30


def tolerance(measured: int) -> float:
    """The issue's bar: 10% of the measured peak or 2 GiB, whichever is larger."""
    return max(0.10 * measured, 2 * GIB)


@lru_cache(maxsize=None)
def points() -> list[dict]:
    with open(DATA) as handle:
        return json.load(handle)["points"]


def device_memory(point: dict) -> int:
    """The memory torch reported for the GPU the point ran on (its out-of-memory limit)."""
    return point["device_memory_bytes"]


def resolved(point: dict) -> dict:
    """The point's command line resolved by megaplug, as `megaplug resolve` would for its rank."""
    return _resolved(tuple(point["argv"]), point["world_size"], point["rank"])


@lru_cache(maxsize=None)
def _resolved(argv: tuple, world_size: int, rank: int) -> dict:
    from megaplug.megatron import parse_and_validate_args

    environ = {"WORLD_SIZE": str(world_size), "RANK": str(rank), "LOCAL_RANK": "0",
               "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    namespace = parse_and_validate_args(argv=list(argv), environ=environ, torch_types=False,
                                        register=False, preflight=False)
    return dict(vars(namespace))
