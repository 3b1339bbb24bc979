"""megaplug-mla: multi-latent attention flags and checks for megaplug.

Adds ``--multi-latent-attention`` and the MLA shape flags (low-rank query and key/value
projections, head dimensions, YaRN scaling). Turns MLA on when the hybrid layer pattern
(owned by the ``experimental`` plugin, hence ``after=("experimental",)``) contains
MLA-based attention layers, and checks MLA's incompatible combinations.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="mla",
    description="Multi-latent attention: low-rank query/key/value projections.",
    options="megaplug_mla.options:MlaOptions",
    version="0.1.0",
    after=("experimental",),
    # named, not imported: the rules module is imported when a resolve first derives
    rules=Rules(derive=("megaplug_mla.rules:DERIVATIONS",),
                validate=("megaplug_mla.rules:CHECKS",)),
)
