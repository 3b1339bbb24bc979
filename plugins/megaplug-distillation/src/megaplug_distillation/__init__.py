"""megaplug plugin ``distillation``: logits distillation for Megatron.

A teacher run saves its top-k (optionally top-p masked) logits with ``--logits-save-dir``;
a student run loads them with ``--logits-load-dir`` and mixes the distillation loss into
its LM loss. This plugin declares those flags and checks what saving logits needs.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

__all__ = ["DistillationOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="distillation",
    description="Logits distillation: save a teacher's top logits, train a student on them.",
    version="0.1.0",
    # named, not imported: the checks module is imported when a resolve first validates
    rules=Rules(validate=("megaplug_distillation.checks:CHECKS",)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the logits-distillation flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import DistillationOptions

    flags.add_options(DistillationOptions)


def __getattr__(name: str) -> object:
    if name == "DistillationOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
