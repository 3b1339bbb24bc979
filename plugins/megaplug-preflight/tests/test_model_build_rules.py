"""Layer-construction warnings at their boundaries: the warning whole (message, flags) and the
near miss that must stay silent.

Megatron's configuration accepts an MLP width that its column-parallel layers cannot split
evenly; pre-flight warns. The expert width is split over the expert tensor-parallel ranks,
and only where there are experts.
"""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, ENVIRON, target

import megaplug

AT_LAYER_BUILD = "; Megatron would fail when building the model"


def outcome(argv: list[str]) -> tuple[list[tuple], list[tuple]]:
    """Pre-flight's (problems, warnings) for ``DENSE + argv``, each (message, flags, hint)."""
    try:
        resolved = megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON), target=target())
    except megaplug.ConfigError as error:
        problems, warnings = error.problems, error.warnings
    else:
        problems, warnings = (), resolved.warnings
    return ([(p.message, tuple(p.flags), p.hint) for p in problems if p.plugin == "preflight"],
            [(w.message.removesuffix(AT_LAYER_BUILD), tuple(w.flags), w.hint)
             for w in warnings if w.plugin == "preflight"])


EXPERT_WIDTH_WITHOUT_EXPERTS = (
    "--moe-ffn-hidden-size 255 is set but --num-experts is not; Megatron would raise this when "
    "building the model", ("--moe-ffn-hidden-size", "--num-experts"),
    "set --num-experts, or drop --moe-ffn-hidden-size")


@pytest.mark.parametrize("argv, expected", [
    # no experts: the expert width (an error of its own) is not split over expert TP ranks
    (["--moe-ffn-hidden-size", "255", "--tensor-model-parallel-size", "2"],
     ([EXPERT_WIDTH_WITHOUT_EXPERTS], [])),
    (["--ffn-hidden-size", "255", "--tensor-model-parallel-size", "2"],
     ([], [("--ffn-hidden-size 255 cannot be split over --tensor-model-parallel-size 2",
            ("--ffn-hidden-size", "--tensor-model-parallel-size"), None)])),
    (["--ffn-hidden-size", "256", "--tensor-model-parallel-size", "2"], ([], [])),
])
def test_mlp_width_warning_whole(argv: list[str], expected: tuple) -> None:
    assert outcome(argv) == expected
