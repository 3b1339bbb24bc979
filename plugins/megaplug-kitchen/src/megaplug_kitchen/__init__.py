"""megaplug kitchen plugin: quantization recipes from the optional ``kitchen`` package.

The plugin requires the ``kitchen`` package: without it megaplug marks the plugin
unavailable, declares none of its flags, and tells a user who passes one what to install.
``kitchen`` itself is never imported here; the model code that applies the recipe does that.
"""

from __future__ import annotations

from megaplug import PluginInfo, Requirement

megaplug_plugin = PluginInfo(
    name="kitchen",
    description="Kitchen quantization recipes (needs the kitchen package).",
    options="megaplug_kitchen.options:declare",
    requires=(Requirement("kitchen"),),
)
