"""megaplug kitchen plugin: quantization recipes from the optional ``kitchen`` package.

The plugin requires the ``kitchen`` package: without it megaplug marks the plugin
unavailable, declares none of its flags, and tells a user who passes one what to install.
``kitchen`` itself is never imported here; the model code that applies the recipe does that.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Requirement, hookimpl

__all__ = ["KitchenOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="kitchen",
    description="Kitchen quantization recipes (needs the kitchen package).",
    requires=(Requirement("kitchen"),),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare --kitchen-config-file and --kitchen-recipe-number (mutually exclusive)."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import declare

    declare(flags)


def __getattr__(name: str) -> object:
    if name == "KitchenOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
