"""megaplug-mla: multi-latent attention flags and checks for megaplug.

Adds ``--multi-latent-attention`` and the MLA shape flags (low-rank query and key/value
projections, head dimensions, YaRN scaling). Turns MLA on when the hybrid layer pattern
(owned by the ``experimental`` plugin, hence ``after=("experimental",)``) contains
MLA-based attention layers, and checks MLA's incompatible combinations.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

megaplug_plugin = PluginInfo(
    name="mla",
    description="Multi-latent attention: low-rank query/key/value projections.",
    version="0.1.0",
    after=("experimental",),
    # named, not imported: the rules module is imported when a resolve first derives
    rules=Rules(derive=("megaplug_mla.rules:DERIVATIONS",),
                validate=("megaplug_mla.rules:CHECKS",)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the MLA flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import MlaOptions

    flags.add_options(MlaOptions)


__all__ = ["MlaOptions", "megaplug_plugin"]


def __getattr__(name: str) -> object:
    if name == "MlaOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
