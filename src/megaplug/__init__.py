"""megaplug: a plugin-based argument framework for large-model training.

A plugin author needs ``hookimpl``, ``PluginInfo`` / ``Requirement``, the ``Flag`` /
``FromEnv`` / ``Computed`` markers and ``Problem``. An entry point needs ``resolve``
(or ``megaplug.megatron`` for a Megatron-compatible namespace) and ``ConfigError``.
"""

from ._api import load, resolve
from ._config import Draft, Provenance, Resolved
from ._errors import ConfigError, PluginError, Problem
from ._options import Computed, Flag, FromEnv, enum_by_name
from ._patterns import PatternError, parse_pattern
from ._plugins import PluginInfo, Requirement
from ._target import TargetEnvironment
from ._values import TorchDType
from .hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = [
    "Computed",
    "ConfigError",
    "Draft",
    "Flag",
    "FromEnv",
    "PatternError",
    "PluginError",
    "PluginInfo",
    "Problem",
    "Provenance",
    "Requirement",
    "Resolved",
    "TargetEnvironment",
    "TorchDType",
    "__version__",
    "enum_by_name",
    "hookimpl",
    "load",
    "parse_pattern",
    "resolve",
]
