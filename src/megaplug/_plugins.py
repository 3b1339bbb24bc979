"""Finding, loading, ordering and describing plugins."""

from __future__ import annotations

import enum
import importlib
import time
import types

from . import hookspecs
from ._errors import PluginError, did_you_mean
from ._record import FrozenRecord, MutableRecord
from ._rules import Rules
from ._version import __version__
from .cache._entry_points import import_quietly, note_shadowed
from .sources._selection import (PluginSelection, is_plugin_name, is_shipped, name_refusal,
                                 shipped_first)
from .environment import TargetEnvironment

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

#: Built-in plugins, registered through the same path as installed ones.
BUILTIN_PLUGINS: tuple[str, ...] = tuple(f"megaplug.builtin.{name}" for name in (
    "model", "parallel", "precision", "training", "checkpointing", "data", "logging",
    "resilience", "experimental"))

_BLOCKED = "blocked by -p no: / MEGAPLUG_DISABLE"


class Requirement(FrozenRecord):
    """An optional package a plugin needs: import name and an optional minimum version."""

    __slots__ = ("import_name", "min_version")
    import_name: str
    min_version: str | None

    def __init__(self, import_name: str, min_version: str | None = None) -> None:
        self._fill(locals())

    def __str__(self) -> str:
        return self.import_name + (f">={self.min_version}" if self.min_version else "")


class PluginInfo(FrozenRecord):
    """What a plugin module declares about itself as ``megaplug_plugin = PluginInfo(...)``.

    ``options``: the plugin's settings, by reference (``"pkg.options:MyOptions"``, imported
    only when a flag table is declared): an ``@options`` class, or a function that declares
    flags on the :class:`FlagDeclarations` it receives (for what a class cannot say: a
    mutually exclusive group, an untyped flag); ``after``: plugins that must run first (each
    must exist, though it may be inactive); ``before``: plugins to precede when present;
    ``requires``: optional packages, without which the plugin is *unavailable*; ``rules``:
    see :class:`Rules`. Every name given here is checked when a plugin set loads.
    """

    __slots__ = ("name", "description", "version", "after", "before", "requires", "rules",
                 "options")
    _hidden = ("rules", "options")  # code, not facts about the plugin: not in equality or repr
    name: str
    description: str
    version: str | None
    after: tuple[str, ...]
    before: tuple[str, ...]
    requires: tuple[Requirement, ...]
    rules: Rules
    options: str | Callable[..., Any] | None

    def __init__(self, name: str, description: str = "", version: str | None = None,
                 after: str | Iterable[str] = (), before: str | Iterable[str] = (),
                 requires: str | Requirement | Iterable[str | Requirement] = (),
                 rules: Rules | None = None,
                 options: str | Callable[..., Any] | None = None) -> None:
        after, before = _as_tuple(after), _as_tuple(before)
        requires = tuple(Requirement(r) if isinstance(r, str) else r
                         for r in _as_tuple(requires))
        rules = Rules() if rules is None else rules
        self._fill(locals())


def _as_tuple(value: Any) -> tuple[Any, ...]:
    """One name (or requirement) or several, as a tuple."""
    return (value,) if isinstance(value, (str, Requirement)) else tuple(value)


class Status(str, enum.Enum):
    """Where a plugin stands. Compares and prints as its value (``"active"``)."""

    ACTIVE = "active"          # registered: its hooks and rules run
    BLOCKED = "blocked"        # -p no:NAME / MEGAPLUG_DISABLE: never imported on a resolve
    UNAVAILABLE = "unavailable"  # a required package is missing: it adds no flags
    BROKEN = "broken"          # failed to import, register, order or declare

    def __str__(self) -> str:
        return self.value


ACTIVE, BLOCKED, UNAVAILABLE, BROKEN = Status


class PluginRecord(MutableRecord):
    """Everything megaplug knows about one plugin, whatever its status.

    ``loader`` imports a blocked plugin, only to name it in an error message.
    """

    __slots__ = ("name", "status", "source", "reason", "module", "info", "entry_point",
                 "distribution", "version", "hooks", "loader")
    _hidden = ("loader",)

    def __init__(self, name: str, status: Status, source: str, reason: str = "",
                 module: Any = None, info: PluginInfo | None = None,
                 entry_point: str | None = None, distribution: str | None = None,
                 version: str | None = None, hooks: tuple[str, ...] = (),
                 loader: Any = None) -> None:
        self._fill(locals())

    @property
    def after(self) -> tuple[str, ...]:
        return self.info.after if self.info else ()

    @property
    def before(self) -> tuple[str, ...]:
        return self.info.before if self.info else ()

    def where(self) -> str:
        """'entry point X, distribution Y' style description for error messages."""
        parts = [f"entry point {self.entry_point}" if self.entry_point else "",
                 f"distribution {self.distribution}" if self.distribution else ""]
        return ", ".join(filter(None, parts)) or self.source

    def to_dict(self) -> dict[str, Any]:
        facts = ("name", "version", "distribution", "entry_point", "source", "reason")
        return {**{name: getattr(self, name) for name in facts},
                "status": self.status.value, "hooks": list(self.hooks),
                "after": list(self.after), "before": list(self.before),
                "requires": [str(r) for r in self.info.requires] if self.info else []}


def describe_failure(exc: BaseException) -> str:
    """What went wrong in a plugin's code, for its record or problem: the exception, or the
    ``sys.exit()`` it called."""
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r}), which megaplug does not let end the process"
    return f"{type(exc).__name__}: {exc}"


def _entry_points() -> list[Any]:
    from .cache._entry_points import entry_points

    return entry_points()


#: pluggy options that order or wrap calls across plugins; megaplug's order is declared.
_CALL_ORDER_OPTIONS = ("tryfirst", "trylast", "hookwrapper", "wrapper")


def _new_manager() -> Any:
    """pluggy's manager of megaplug's hooks (pluggy is imported here, for the first plugin
    that implements a hook)."""
    import pluggy

    manager = pluggy.PluginManager("megaplug")
    manager.add_hookspecs(hookspecs)
    return manager


def _implements_hooks(plugin: Any) -> bool:
    """Whether pluggy has hook implementations to look at: a module whose own names carry
    no hook marker has none (every declarative plugin: its ``PluginInfo`` says it all);
    anything else -- an object, a module that computes attributes -- goes to pluggy."""
    namespace = vars(plugin) if isinstance(plugin, types.ModuleType) else None
    if namespace is None or "__getattr__" in namespace or "__dir__" in namespace:
        return True
    try:
        return any(hasattr(value, "megaplug_impl") for value in namespace.values())
    except Exception:  # noqa: BLE001  (an odd object's __getattr__): let pluggy look
        return True


class PluginSet:
    """The loaded plugins of one process: records for all, a pluggy manager for the active.

    Built-ins come first, then entry points (unless autoloading is off), then modules
    named by ``MEGAPLUG_PLUGINS`` / ``-p``. A blocked plugin is never imported.
    """

    def __init__(self, selection: PluginSelection | None = None, *,
                 builtins: Iterable[str | types.ModuleType | object] = BUILTIN_PLUGINS,
                 extra: Iterable[object] = (), local: TargetEnvironment | None = None,
                 tolerant: bool = False) -> None:
        started = time.perf_counter()
        self.selection = selection or PluginSelection()
        #: Mark plugins with impossible ordering broken instead of raising (``megaplug list``).
        self.tolerant = tolerant
        self.local = local or TargetEnvironment()
        self.records: dict[str, PluginRecord] = {}
        #: Each active plugin's hook implementations: hook -> (function, argument names).
        self.implementations: dict[str, dict[str, tuple[Any, tuple[str, ...]]]] = {}
        self._manager: Any = None  # pluggy's, made for the first plugin with a hook
        for item in builtins:
            self._load_object(item, source="builtin")
        for entry_point in shipped_first(_entry_points()) if self.selection.autoload else ():
            self._load_entry_point(entry_point)
        for name in self.selection.load:
            self._load_named(name)
        for item in extra:
            self._load_object(item, source="extra")
        self.order = self._resolve_order()
        #: Malformed entries of the selection and blocked names no plugin has: (message, hint).
        self.selection_problems = self._selection_problems()
        #: Seconds spent finding, importing and ordering plugins.
        self.discovery_seconds = time.perf_counter() - started

    @property
    def manager(self) -> Any:
        """pluggy's ``PluginManager``, with every active plugin that implements a hook
        registered (pluggy validated each as it registered)."""
        if self._manager is None:
            self._manager = _new_manager()
        return self._manager

    def _load_named(self, name: str) -> None:
        if name in self.records:
            return
        for entry_point in _entry_points() if not self.selection.autoload else ():
            if entry_point.name == name:
                return self._load_entry_point(entry_point, source="-p")
        self._load_object(name, source="-p / MEGAPLUG_PLUGINS")

    def _load_entry_point(self, entry_point: Any, source: str = "entry point") -> None:
        facts = dict(entry_point=f"{entry_point.name} = {entry_point.value}",
                     distribution=entry_point.distribution, version=entry_point.version)
        if entry_point.name in self.selection.block:
            self._add(PluginRecord(entry_point.name, BLOCKED, source, _BLOCKED,
                                   loader=entry_point.load, **facts))
        elif entry_point.name in self.records:  # a built-in's name, or another distribution's
            note_shadowed(self.selection.problems, entry_point, self.records[entry_point.name])
        else:
            try:
                module = entry_point.load()
            # a broken third-party plugin must not take megaplug down, nor may one that calls
            # sys.exit() as it loads (os._exit() cannot be caught: it ends the process)
            except (Exception, SystemExit) as exc:
                self._add(PluginRecord(entry_point.name, BROKEN, source,
                                       f"import failed: {describe_failure(exc)}", **facts))
                return
            self._register(module, source, entry_point.name, **facts)

    def _load_object(self, item: Any, source: str) -> None:
        if isinstance(item, str):
            name = item.rsplit(".", 1)[-1]
            if name in self.selection.block or item in self.selection.block:
                loader = lambda: importlib.import_module(item)  # noqa: E731
                return self._add(PluginRecord(name, BLOCKED, source, _BLOCKED, loader=loader))
            try:
                item = import_quietly(item)  # what it prints goes to stderr
            except (Exception, SystemExit) as exc:
                return self._add(PluginRecord(name, BROKEN, source, f"import of {item} "
                                              f"failed: {describe_failure(exc)}"))
        facts = dict(distribution="megaplug", version=__version__) if source == "builtin" else {}
        self._register(item, source, getattr(item, "__name__", repr(item)), **facts)

    def _register(self, plugin: Any, source: str, fallback_name: str, *,
                  entry_point: str | None = None, distribution: str | None = None,
                  version: str | None = None) -> None:
        info = getattr(plugin, "megaplug_plugin", None)
        info = info if isinstance(info, PluginInfo) else None
        name = info.name if info else fallback_name.rsplit(".", 1)[-1]
        record = PluginRecord(name, ACTIVE, source, "", plugin, info, entry_point, distribution,
                              info.version if info and info.version else version,
                              _implemented_hooks(plugin, info))
        if any(known.module is plugin for known in self.records.values()):
            return  # the same module again (an entry point and plugins=[module])
        if name in self.records or not is_plugin_name(name):
            return self._refuse_name(record, fallback_name.rsplit(".", 1)[-1])
        missing = [problem for r in (info.requires if info else ())
                   if (problem := self.local.requirement_problem(r.import_name, r.min_version))]
        if name in self.selection.block:
            record.status, record.reason = BLOCKED, _BLOCKED
        elif missing:
            record.status, record.reason = UNAVAILABLE, "; ".join(missing)
        elif problem := self._registration_problem(plugin, name):
            record.status, record.reason = BROKEN, problem
        self._add(record)

    def _refuse_name(self, record: PluginRecord, own_name: str) -> None:
        """A plugin whose name cannot be blocked, or that another already has: it is
        recorded broken (under its own entry point's or module's name where that is free)."""
        holder = self.records.get(record.name)
        if holder is not None and (own_name in (record.name, *self.records)
                                   or not is_plugin_name(own_name)):
            raise PluginError(f"two plugins are named {record.name!r}: {holder.where()} and "
                              f"{record.where()}")
        record.status, record.reason = BROKEN, name_refusal(
            record.name, holder and f"{holder.name!r} ({holder.where()})", own_name)
        record.name = own_name if holder is not None else record.name
        self._add(record)

    def _registration_problem(self, plugin: Any, name: str) -> str | None:
        """Why pluggy (``register`` and ``check_pending``) or megaplug refuses the plugin's
        hooks; ``None`` when all is well. pluggy is the one judge of a hook implementation;
        a plugin that implements none never needs it."""
        if not _implements_hooks(plugin):
            self.implementations[name] = {}
            return None
        for hook in _implemented_hooks(plugin):
            options = getattr(plugin, hook).megaplug_impl
            refused = [option for option in _CALL_ORDER_OPTIONS if options.get(option)]
            if refused:
                return (f"hook {hook} uses {refused[0]}=True; megaplug runs plugins in the "
                        "order PluginInfo(after=..., before=...) declares, each on its own, "
                        "so pluggy's call-order options are refused")
        manager = self.manager
        try:
            manager.register(plugin, name=name)
            manager.check_pending()
        except Exception as exc:
            if manager.is_registered(plugin):
                manager.unregister(plugin)
            detail = str(exc).replace("\n", "; ")
            return (f"registration failed: {type(exc).__name__}: {detail}"
                    f" (megaplug's hooks are {', '.join(hookspecs.HOOKS)})")
        # the kernel calls each plugin's implementations itself, in the declared order
        self.implementations[name] = {
            hook: (impl.function, tuple(impl.argnames))
            for hook in hookspecs.HOOKS
            for impl in getattr(manager.hook, hook).get_hookimpls() if impl.plugin_name == name}
        return None

    def _add(self, record: PluginRecord) -> None:
        self.records.setdefault(record.name, record)

    def _selection_problems(self) -> list[tuple[str, str]]:
        found = list(self.selection.problems)
        known = {*self.records, *BUILTIN_PLUGINS, *self.selection.load}
        unknown = self.selection.block - known
        if unknown and not self.selection.autoload:  # blocking an entry point not loaded
            unknown -= {entry_point.name for entry_point in _entry_points()}
        for name in sorted(unknown):
            same_but_case = [known_name for known_name in sorted(self.records)
                             if known_name.lower() == name.lower()]
            if same_but_case:
                hint = f"did you mean {same_but_case[0]}? Plugin names are matched exactly"
            else:  # " (did you mean X?)" as a hint of its own
                hint = did_you_mean(name, self.records)[2:-1] or (
                    "megaplug list names the installed plugins")
            found.append((f"cannot block plugin {name!r} (-p no: / MEGAPLUG_DISABLE): no "
                          "installed plugin has that name, so nothing was blocked", hint))
        return found

    def _resolve_order(self) -> list[str]:
        """A topological order of the active plugins; ties go to the alphabetically first."""
        active = sorted(n for n, r in self.records.items() if r.status == ACTIVE)
        later: dict[str, set[str]] = {name: set() for name in active}
        for name in active:
            record = self.records[name]
            for first in record.after:
                if first not in self.records:
                    return self._ordering_failure([name], (
                        f"plugin {name!r} ({record.where()}) must run after {first!r}, "
                        f"which is not installed{did_you_mean(first, self.records)}"))
                later.get(first, set()).add(name)
            later[name].update(n for n in record.before if n in later)
        waiting = {name: 0 for name in active}
        for name in (n for targets in later.values() for n in targets):
            waiting[name] += 1
        # alphabetically first of the ready is last: kept sorted backwards (no heapq import)
        ready = sorted((name for name, count in waiting.items() if count == 0), reverse=True)
        order: list[str] = []
        while ready:
            order.append(ready.pop())
            for name in later[order[-1]]:
                waiting[name] -= 1
                if waiting[name] == 0:
                    ready = sorted((*ready, name), reverse=True)
        if len(order) == len(active):
            return order
        cycle = _cycle({n: later[n] for n in active if n not in order})
        return self._ordering_failure(cycle, "plugin ordering has a cycle among: "
                                      + ", ".join(cycle)
                                      + " (check their after=/before= declarations)")

    def _ordering_failure(self, names: list[str], message: str) -> list[str]:
        """Raise, or when tolerant mark ``names`` broken and order the rest: of a cycle, the
        plugins megaplug does not ship where there are any (a newcomer's contradiction)."""
        if not self.tolerant:
            raise PluginError(message)
        newcomers = [name for name in names if not is_shipped(self.records[name])]
        for name in newcomers or names:
            self.records[name].status, self.records[name].reason = BROKEN, message
            if self._manager is not None and self._manager.has_plugin(name):
                self._manager.unregister(name=name)
            self.implementations.pop(name, None)
        return self._resolve_order()

    def active(self) -> list[PluginRecord]:
        return [self.records[name] for name in self.order]


def _cycle(stuck: dict[str, set[str]]) -> list[str]:
    """The plugins on a cycle among ``stuck`` (plugin -> plugins that must follow it)."""
    import graphlib

    try:
        graphlib.TopologicalSorter({n: {m for m in later if m in stuck}
                                    for n, later in stuck.items()}).prepare()
    except graphlib.CycleError as exc:
        return sorted(set(exc.args[1]))
    return sorted(stuck)


def _implemented_hooks(plugin: Any, info: PluginInfo | None = None) -> tuple[str, ...]:
    """The hooks a plugin implements (whether or not it registers); with ``info``, also the
    phases it declares rules for."""
    rules = {**info.rules.steps, "add_args": info.options} if info else {}
    return tuple(hook for hook in hookspecs.HOOKS
                 if hasattr(getattr(plugin, hook, None), "megaplug_impl") or rules.get(hook))
