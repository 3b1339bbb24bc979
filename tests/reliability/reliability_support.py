"""Shared helpers of the reliability tests: the parity cases, a minimal launch, environments."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, Iterator
from unittest import mock

from parity import case_files, target_for
from parity import third_party_blocks as _third_party_blocks


def third_party_blocks() -> list[str]:
    """Plugins Megatron's validate_args does not stand for: third-party ones and pre-flight
    (whose checks Megatron makes only when it builds the model)."""
    return [*_third_party_blocks(), "-p", "no:preflight"]

MINIMAL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
           "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
           "--train-iters", "10", "--lr", "1e-4"]

#: Environment variables that change which plugins load or how a resolve reads the process.
_CONTROL_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_PLUGINS", "MEGAPLUG_DISABLE",
                      "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD")


def all_cases() -> list[tuple[str, dict[str, Any]]]:
    """Every shared parity case and mutation as (name, case)."""
    return [(path.stem, json.loads(path.read_text())) for path in case_files()]


def ok_cases() -> list[tuple[str, dict[str, Any]]]:
    """The parity cases Megatron accepted."""
    return [(name, case) for name, case in all_cases() if case["expect"] == "ok"]


@contextlib.contextmanager
def resolve_environment(world_size: str | None = None, **extra: str) -> Iterator[None]:
    """``os.environ`` without plugin controls and rank variables, plus the given ones."""
    with mock.patch.dict(os.environ):
        for name in _CONTROL_VARIABLES:
            os.environ.pop(name, None)
        if world_size is not None:
            os.environ["WORLD_SIZE"] = world_size
        os.environ.update(extra)
        yield


__all__ = ["MINIMAL", "all_cases", "ok_cases", "resolve_environment", "target_for",
           "third_party_blocks", "Path"]
