"""megaplug-mla: multi-latent attention flags and checks for megaplug.

Adds ``--multi-latent-attention`` and the MLA shape flags (low-rank query and key/value
projections, head dimensions, YaRN scaling). Turns MLA on when the hybrid layer pattern
(owned by the ``experimental`` plugin, hence ``after=("experimental",)``) contains
MLA-based attention layers, and checks MLA's incompatible combinations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from .options import MlaOptions
from .rules import CHECKS, DERIVATIONS

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="mla",
    description="Multi-latent attention: low-rank query/key/value projections.",
    version="0.1.0",
    after=("experimental",),
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the MLA flags."""
    flags.add_options(MlaOptions)


@hookimpl
def derive(config: Draft) -> None:
    """Switch MLA on for hybrid patterns with MLA attention layers."""
    for step in DERIVATIONS:
        step(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report MLA problems."""
    for check in CHECKS:
        check(config)


__all__ = ["MlaOptions", "megaplug_plugin"]
