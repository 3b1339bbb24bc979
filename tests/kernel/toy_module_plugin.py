"""The toy core plugin as a module, for loading by name (-p / MEGAPLUG_PLUGINS)."""

from toy_plugins import Core

_core = Core()
megaplug_plugin = Core.megaplug_plugin
add_args = _core.add_args
normalize = _core.normalize
derive = _core.derive
validate = _core.validate
