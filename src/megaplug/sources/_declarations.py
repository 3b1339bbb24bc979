"""What plugins give besides flags: the names in their ``PluginInfo`` (groups of rules,
options, superseded rules, ordering), checked as a plugin set loads, and the message for a
``"module:NAME"`` that names nothing, with the nearest name that exists."""

from __future__ import annotations

from .._errors import did_you_mean

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping


def reference_problems(records: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(plugin, message) for every name a plugin set's active plugins give that names
    nothing: a group of rules (``"module:NAME"``, imported now), a superseded rule
    (``"plugin.rule"``) of an installed plugin; a superseded or ``before`` plugin that is not
    installed only where it looks like a misspelt installed one (it may be optional).
    The kernel runs this before it stores a declared flag table (so a table read back was
    checked) or else before its first parse."""
    active = {name: record.info for name, record in records.items()
              if str(record.status) == "active" and record.info is not None}
    found: list[tuple[str, str]] = []
    names: dict[str, set[str | None]] = {}
    for plugin, info in active.items():
        names[plugin] = set()
        for step in (step for steps in info.rules.steps.values() for step in steps):
            try:
                names[plugin].update(rule.name for rule in (
                    step.rules() if step.group is not None else [step]))
            except Exception as exc:  # noqa: BLE001  (whatever importing it raised)
                found.append((plugin, unresolved(plugin, f"the rules {step.group}",
                                                 str(step.group), exc)))
    for plugin, info in active.items():
        for target, _ in info.rules.superseded:
            owner, _, rule = target.partition(".")
            near = did_you_mean(owner, records) if owner not in records else ""
            if near:  # an absent plugin may be optional; one this close is a misspelling
                found.append((plugin, f"plugin {plugin!r} supersedes {target!r}, but no plugin"
                              f" is named {owner!r}{near}"))
            elif owner in names and rule not in names[owner] and not getattr(
                    records[owner].module, "megaplug_stand_in", False):  # a test's partial one
                found.append((plugin, f"plugin {plugin!r} supersedes {target!r}, but plugin "
                              f"{owner!r} has no rule {rule!r}"
                              f"{did_you_mean(rule, map(str, names[owner] - {None}))}"))
        for other in info.before:
            near = did_you_mean(other, records) if other not in records else ""
            if near:  # an absent plugin may be optional; one this close is a misspelling
                found.append((plugin, f"plugin {plugin!r} must run before {other!r}, which "
                              f"is not installed{near}"))
    return found


def unresolved(plugin: str, what: str, reference: str, error: BaseException) -> str:
    """Why ``plugin``'s ``what`` (a ``module:NAME`` reference) names nothing, with the
    nearest name that module or its package has; a group that imports but holds no list of
    rules is named as such, with what it holds."""
    import importlib

    if isinstance(error, RuleTableError):
        return f"plugin {plugin!r}: {what}: {error}"

    module_name, _, name = reference.partition(":")
    try:
        found = did_you_mean(name, [n for n in vars(importlib.import_module(module_name))
                                    if not n.startswith("_")])
        found = found and found.replace("mean ", f"mean {module_name}:")
    except ImportError:  # a module: the nearest in the deepest package that imports
        parts, found = module_name.split("."), ""
        for depth in range(len(parts) - 1, 0, -1):
            try:
                import pkgutil

                package = ".".join(parts[:depth])
                near = did_you_mean(parts[depth], [m.name for m in pkgutil.iter_modules(
                    importlib.import_module(package).__path__)])
            except Exception:  # noqa: BLE001  (not a package either: look higher)
                continue
            if near:  # " (did you mean NAME?)": the module path with NAME in its place
                found = f" (did you mean {'.'.join([package, near[15:-2], *parts[depth + 1:]])}"
                found += f":{name}?)"
            break
    return (f"plugin {plugin!r}: {what} names nothing that can be imported "
            f"({type(error).__name__}: {error}){found}")


class RuleTableError(TypeError):
    """A group of rules that imports but holds something other than a list of rules."""


def checked_rule_table(group: str, functions: Any) -> list[Any]:
    """What a group of rules (``"module:NAME"``) names, if it is a list of rules; else
    :class:`RuleTableError` saying what it holds (never a "did you mean" of the name
    written: the name is right, its value is not)."""
    if not isinstance(functions, (list, tuple)):
        raise RuleTableError(f"{group} is {_shown(functions)}, not a list of rules")
    for index, function in enumerate(functions):
        if not callable(function):
            raise RuleTableError(f"{group}[{index}] is {_shown(function)}, not a rule (a "
                                 "function taking the configuration)")
    return list(functions)


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} (a {type(value).__name__})"
