"""The entry functions: ``resolve`` and ``load``."""

from __future__ import annotations

import gc
import os

from ._config import Resolved
from ._kernel import Kernel
from ._plugins import PluginSet
from .sources._selection import PluginSelection
from .sources._config_files import command_line_tokens, take_config_files
from .environment import TargetEnvironment

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

_KERNELS: dict[tuple[Any, ...], Kernel] = {}


def load(argv: Sequence[str] = (), *, environ: Mapping[str, str] | None = None,
         plugins: Sequence[object] = (), builtins: Sequence[object] | None = None,
         target: TargetEnvironment | None = None) -> tuple[Kernel, list[str]]:
    """The kernel for the plugins this command line and environment select.

    Consumes ``-p NAME`` / ``-p no:NAME`` / ``--no-autoload`` from ``argv`` and returns
    the rest. ``plugins`` adds plugin objects or modules directly (tests, embedding
    applications); ``builtins`` replaces the built-in set. The table is for ``target``'s
    release lines (default: this machine's). Kernels are cached per selection and lines, so
    repeated calls in one process discover and declare only once.
    """
    selection = PluginSelection.from_environment(environ)
    rest = selection.take_from_argv(command_line_tokens(argv, "argv"))
    lines = (target or TargetEnvironment(environ=environ)).release_lines()
    key = (tuple(lines.items()), tuple(selection.load), tuple(sorted(selection.block)),
           selection.autoload, tuple(selection.problems),
           tuple(map(id, plugins)), None if builtins is None else tuple(map(id, builtins)))
    if key not in _KERNELS:
        chosen = {} if builtins is None else {"builtins": builtins}
        # Importing and declaring plugins allocates thousands of long-lived objects and frees
        # almost nothing: the cyclic collector's passes over them are pure start-up cost.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            _KERNELS[key] = Kernel(PluginSet(selection, extra=plugins, **chosen),
                                   snapshot=not plugins and builtins is None, lines=lines)
        finally:
            if was_enabled:
                gc.enable()
    return _KERNELS[key], rest


def resolve(argv: Sequence[str] | None = None, *, config_files: Sequence[str] = (),
            defaults: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None,
            target: TargetEnvironment | None = None, plugins: Sequence[object] = (),
            ignore_unknown: bool = False) -> Resolved:
    """Resolve a command line into a read-only configuration, or raise ``ConfigError``.

    ``argv`` defaults to ``sys.argv[1:]``; it may contain ``--config FILE`` (repeatable)
    and ``-p`` plugin controls. ``defaults`` are the caller's defaults (Megatron's
    ``args_defaults``): they fill settings that are still ``None``. ``environ`` replaces
    ``os.environ`` (RANK, WORLD_SIZE, ...); ``target`` states the packages and GPU the
    job will run with.
    """
    import sys

    tokens = command_line_tokens(sys.argv[1:] if argv is None else argv, "argv")
    config_files = command_line_tokens(config_files or (), "config_files")
    if defaults is not None and not callable(getattr(defaults, "items", None)):
        raise TypeError(f"defaults must be a mapping of settings, not {type(defaults).__name__}")
    kernel, rest = load(tokens, environ=environ, plugins=plugins, target=target)
    files, rest = take_config_files(rest)
    return kernel.resolve(rest[1:] if rest[:1] == ["--"] else rest,
                          config_files=[*config_files, *files], defaults=defaults,
                          environ=os.environ if environ is None else environ, target=target,
                          ignore_unknown=ignore_unknown)
