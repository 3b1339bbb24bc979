"""The four hooks a megaplug plugin may implement, and the phases its rules run in.

This module is the plugin author's manual. A plugin usually implements no hook: its
``PluginInfo`` names its settings (``options="pkg.options:Name"``) and its rules
(:class:`megaplug.Rules`), and the kernel imports them when needed. The hooks are for what
is dynamic. A resolve runs the phases in this order, each calling every active plugin in
the declared plugin order: first the plugin's hook of that phase, if any, then its rules
for it. Each contract below holds for a phase's hook and its rules alike.

1. ``add_args``  - once per process: declare settings.
2. (kernel)       - fill values: declared defaults, config files, environment, command
                    line, then caller defaults where a value is still ``None``.
3. ``normalize`` - rewrite deprecated and alternate spellings into canonical values.
4. ``derive``    - compute values from other values.
5. ``validate``  - report problems; sees every normalized and derived value.

Problems from every phase are collected; the resolve fails once, at the end, with all of
them. A plugin names the plugins it must follow with ``PluginInfo(after=...)`` (or
precede, with ``before=...``); registration and installation order never matter.

pluggy validates every implementation: a misspelt hook name or an argument the hook does
not offer makes the plugin *broken*. The kernel calls each hook on its own, so that one
that raises is reported and the others still run; pluggy's ``tryfirst``, ``trylast`` and
wrapper options, which reorder or wrap calls across plugins, are refused.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable
    from ._config import Draft
    from ._errors import Problem
    from ._registry import FlagDeclarations


# The markers set what pluggy's HookspecMarker / HookimplMarker("megaplug") set, written
# out so that marking a hook imports neither pluggy nor ``inspect`` (a large part of
# start-up); tests/kernel/test_plain_hooks.py holds them to pluggy's own.

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
    """Declare settings only known at run time (``PluginInfo(options=...)`` declares the
    rest, before this hook runs).

    Call ``flags.add_options(MyOptions)`` with an options dataclass (see
    :class:`megaplug.Flag`) and/or ``flags.add_argument(...)`` like argparse. An option
    string or dest declared by two plugins is an error naming both. Called once per
    process; must not read configuration values.
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
