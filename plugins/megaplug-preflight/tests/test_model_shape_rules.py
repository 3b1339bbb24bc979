"""The layer count at its boundary: Megatron's model needs at least one layer."""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, ENVIRON, target

import megaplug

AT_MODEL_BUILD = "; Megatron would raise this when building the model"


def whole(argv: list[str]) -> list[tuple]:
    """Every problem of ``DENSE + argv`` as (plugin, message, flags, hint)."""
    try:
        megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON), target=target())
    except megaplug.ConfigError as error:
        return [(p.plugin, p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
                for p in error.problems]
    return []


@pytest.mark.parametrize("layers, expected", [
    ("1", []),
    ("0", [("preflight", "--num-layers 0 must be at least 1", ("--num-layers",),
            "give the model at least one layer")]),
])
def test_layer_count_whole(layers: str, expected: list[tuple]) -> None:
    assert whole(["--num-layers", layers]) == expected
