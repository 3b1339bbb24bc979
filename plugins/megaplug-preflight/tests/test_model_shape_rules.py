"""The layer count at its boundary: Megatron's model needs at least one layer."""

from __future__ import annotations

import pytest
from preflight_launches import every_problem as whole





@pytest.mark.parametrize("layers, expected", [
    ("1", []),
    ("0", [("preflight", "--num-layers 0 must be at least 1", ("--num-layers",),
            "give the model at least one layer")]),
])
def test_layer_count_whole(layers: str, expected: list[tuple]) -> None:
    assert whole(["--num-layers", layers]) == expected
