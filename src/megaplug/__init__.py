"""megaplug: a plugin-based argument framework for large-model training.

A plugin author needs ``hookimpl``, ``PluginInfo`` / ``Requirement`` / ``Rules``, the
``Flag`` / ``FromEnv`` / ``Computed`` markers and ``Problem``. An entry point needs ``resolve``
(or ``megaplug.megatron`` for a Megatron-compatible namespace) and ``ConfigError``;
``load`` gives the ``Kernel`` of a plugin selection, to resolve many times.

Names are imported on first use, so ``import megaplug`` itself costs almost nothing;
every training rank pays only for what it touches.
"""

from __future__ import annotations

from . import _startup
from ._version import __version__

TYPE_CHECKING = False  # megaplug's convention, described in megaplug._startup

#: The public names, by the module that defines them; each is imported on first use.
_MODULES = {
    "._api": ("load", "resolve"),
    "._config": ("Draft", "Provenance", "Resolved"),
    "._errors": ("ConfigError", "PluginError", "Problem"),
    "._kernel": ("Kernel",),
    "._options": ("Computed", "Flag", "FromEnv", "enum_by_name", "options"),
    "._plugins": ("PluginInfo", "Requirement"),
    "._registry": ("FlagDeclarations",),
    "._rules": ("Rules",),
    ".hookspecs": ("hookimpl",),
    ".environment": ("TargetEnvironment",),
    ".values._patterns": ("PatternError", "layer_frequency", "layer_pattern", "parse_pattern"),
    ".values._types": ("TorchDType", "float_or_infinity"),
    ".values._numbers": ("divisors", "spoken"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

# Spelled out (sorted) rather than computed from _EXPORTS, so that linters and type checkers
# see the re-exports; tests/kernel/test_exports.py keeps the two in step.
__all__ = [
    "Computed", "ConfigError", "Draft", "Flag", "FlagDeclarations", "FromEnv", "Kernel",
    "PatternError", "PluginError", "PluginInfo", "Problem", "Provenance", "Requirement",
    "Resolved", "Rules", "TargetEnvironment", "TorchDType", "__version__", "divisors",
    "enum_by_name", "float_or_infinity", "hookimpl", "layer_frequency", "layer_pattern", "load",
    "options", "parse_pattern", "resolve", "spoken",
]


# each name imported when first read, then kept here (megaplug._startup, item 1)
__getattr__, __dir__ = _startup.lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from ._api import load, resolve
    from ._config import Draft, Provenance, Resolved
    from ._errors import ConfigError, PluginError, Problem
    from ._kernel import Kernel
    from ._options import Computed, Flag, FromEnv, enum_by_name, options
    from ._plugins import PluginInfo, Requirement
    from ._registry import FlagDeclarations
    from ._rules import Rules
    from .hookspecs import hookimpl
    from .environment import TargetEnvironment
    from .values._patterns import PatternError, layer_frequency, layer_pattern, parse_pattern
    from .values._numbers import divisors, spoken
    from .values._types import TorchDType, float_or_infinity
