"""The four hooks a megaplug plugin may implement, and the phases its rules run in.

This module is the plugin author's manual. A resolve runs the phases in this order, each
phase calling every active plugin in the declared (topological) plugin order: first the
plugin's hook of that phase, if it implements one, then the rules it declares for the
phase with :class:`megaplug.Rules` (``PluginInfo(rules=...)``), which is the usual way
to write them. Each contract below holds for a phase's hook and its rules alike.

1. ``add_args``  - once per process: declare settings.
2. (kernel)       - fill values: declared defaults, config files, environment, command
                    line, then caller defaults where a value is still ``None``.
3. ``normalize`` - rewrite deprecated and alternate spellings into canonical values.
4. ``derive``    - compute values from other values.
5. ``validate``  - report problems; sees every normalized and derived value.

Problems from every phase are collected; the resolve fails once, at the end, with all of
them. A plugin names the plugins it must follow with ``PluginInfo(after=...)`` (or
precede, with ``before=...``); registration and installation order never matter.

pluggy validates every implementation when its plugin registers: a misspelt hook name or
an argument the hook does not offer makes the plugin *broken*, named in the error. The
kernel calls each plugin's hook on its own, in the declared order, so that a plugin that
raises is reported and the others still run; pluggy's ``tryfirst``, ``trylast`` and
wrapper options would reorder or wrap calls across plugins, so they are refused too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:
    from ._config import Draft
    from ._errors import Problem
    from ._registry import FlagDeclarations


# The markers set the attributes pluggy's HookspecMarker("megaplug") and
# HookimplMarker("megaplug") set (pluggy reads them when a plugin registers), written out
# so that a plugin module marking its hooks imports neither pluggy nor, through it,
# ``inspect`` -- a large part of every process's start-up, where pluggy is seldom needed
# (tests/kernel/test_plain_hooks.py holds them to pluggy's own).

def hookspec(function: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a hook specification (``pluggy.HookspecMarker("megaplug")`` with no options)."""
    function.megaplug_spec = {  # type: ignore[attr-defined]
        "firstresult": False, "historic": False, "warn_on_impl": None,
        "warn_on_impl_args": None}
    return function


def hookimpl(function: Callable[..., Any] | None = None, *, hookwrapper: bool = False,
             optionalhook: bool = False, tryfirst: bool = False, trylast: bool = False,
             specname: str | None = None, wrapper: bool = False) -> Any:
    """Mark a hook implementation: ``@hookimpl`` (pluggy's ``HookimplMarker("megaplug")``;
    its call-order options are refused when the plugin registers)."""
    def mark(target: Callable[..., Any]) -> Callable[..., Any]:
        target.megaplug_impl = {  # type: ignore[attr-defined]
            "wrapper": wrapper, "hookwrapper": hookwrapper, "optionalhook": optionalhook,
            "tryfirst": tryfirst, "trylast": trylast, "specname": specname}
        return target

    return mark if function is None else mark(function)

#: The phases of a resolve after ``add_args``, in the order they run.
PHASES = ("normalize", "derive", "validate")
#: Every hook a plugin may implement.
HOOKS = ("add_args", *PHASES)


@hookspec
def add_args(flags: "FlagDeclarations") -> None:
    """Declare this plugin's settings.

    Call ``flags.add_options(MyOptions)`` with an options dataclass (see
    :class:`megaplug.Flag`), and/or ``flags.add_argument(...)`` like argparse. Every
    option string and dest must be unique across all plugins; a clash is an error naming
    both plugins. Called once per process; must not read configuration values.
    """


@hookspec
def normalize(config: "Draft") -> None:
    """Turn deprecated or alternate spellings into canonical values.

    Runs before anything else reads values. Use ``config.set(dest, value,
    reason=..., inputs=(old_dest,))`` so provenance says what was migrated, ``config.warn``
    to tell the user, and ``config.discard(old_dest)`` to drop a retired setting from the
    result. Report impossible combinations with ``config.error``.
    """


@hookspec
def derive(config: "Draft") -> None:
    """Compute values from other values (e.g. data-parallel size from world size).

    Use ``config.set(dest, value, inputs=(...))``: provenance records "derived by
    <plugin> from <inputs>". A value that cannot be derived is reported with
    ``config.error`` (flags involved, hint); the resolve still runs every other hook.
    """


@hookspec
def validate(config: "Draft") -> "Iterable[Problem] | None":
    """Report problems; never change a value.

    Report with ``config.error(message, flags=..., hint=...)`` or return / yield
    :class:`megaplug.Problem` objects. ``config`` is read-only here: ``set`` and
    ``discard`` raise, and a plugin that mutates a value in place is reported.
    """
