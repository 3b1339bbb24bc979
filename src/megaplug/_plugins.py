"""Finding, loading, ordering and describing plugins."""

from __future__ import annotations

import enum
import heapq
import importlib
import os
import time
import types
from typing import Any, Callable, Iterable, Sequence

import pluggy

from . import hookspecs
from ._version import __version__
from ._errors import PluginError
from ._record import FrozenRecord, MutableRecord
from ._target import TargetEnvironment

#: Built-in plugins, registered through the same path as installed ones.
BUILTIN_PLUGINS: tuple[str, ...] = (
    "megaplug.builtin.model",
    "megaplug.builtin.parallel",
    "megaplug.builtin.precision",
    "megaplug.builtin.training",
    "megaplug.builtin.checkpointing",
    "megaplug.builtin.data",
    "megaplug.builtin.logging",
    "megaplug.builtin.resilience",
    "megaplug.builtin.experimental",
)


class Requirement(FrozenRecord):
    """An optional package a plugin needs: import name and an optional minimum version."""

    __slots__ = ("import_name", "min_version")
    import_name: str
    min_version: str | None

    def __init__(self, import_name: str, min_version: str | None = None) -> None:
        object.__setattr__(self, "import_name", import_name)
        object.__setattr__(self, "min_version", min_version)

    def __str__(self) -> str:
        return self.import_name + (f">={self.min_version}" if self.min_version else "")


#: A rule: a small function of the draft. A check may also return or yield Problems.
Rule = Callable[[Any], Any]


class RuleStep(FrozenRecord):
    """One declared rule: its function, its name, and the condition it runs under."""

    __slots__ = ("function", "name", "when")
    function: Rule
    name: str | None
    when: Callable[[Any], bool] | None

    def __init__(self, function: Rule, name: str | None = None,
                 when: Callable[[Any], bool] | None = None) -> None:
        if not callable(function) or (when is not None and not callable(when)):
            raise TypeError(f"a rule and its condition must be callable, got {function!r}")
        object.__setattr__(self, "function", function)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "when", when)


class Rules:
    """A plugin's normalizations, derivations and checks, declared as data.

    Each rule is a small function of the draft; the kernel runs a phase's rules in the
    order they are declared (after the plugin's own hook for that phase, if it has one),
    names the rule in the provenance of every value it sets and in every problem it
    reports, and reports a rule that raises without stopping the others. Declare rules
    with decorators (``@rules.derive``), as a table (``Rules(validate=(check_a,
    check_b))``), or in a group that runs only when a condition holds
    (``rules.validate(check_a, check_b, when=uses_feature)``); give the plugin's rules
    to the kernel as ``PluginInfo(rules=rules)``.

    A feature whose presence changes what another plugin's rule should say takes that
    rule over while it is in use: ``rules.supersede("parallel.check_x", when=uses_fsdp)``
    skips the named rule whenever the condition holds, and the feature's own rules say
    what applies instead. That is how a built-in rule stays free of feature settings.
    """

    __slots__ = ("steps", "superseded")

    def __init__(self, *, normalize: Iterable[Rule] = (), derive: Iterable[Rule] = (),
                 validate: Iterable[Rule] = ()) -> None:
        #: The declared rules of each phase, in order.
        self.steps: dict[str, list[RuleStep]] = {phase: [] for phase in hookspecs.PHASES}
        #: Other plugins' rules (``"plugin.rule"``) this plugin takes over, and when.
        self.superseded: list[tuple[str, Callable[[Any], bool]]] = []
        self.normalize(*normalize)
        self.derive(*derive)
        self.validate(*validate)

    def _declare(self, phase: str, rules: tuple[Rule, ...],
                 when: Callable[[Any], bool] | None) -> Any:
        def declare(*functions: Rule) -> Rule | None:
            self.steps[phase].extend(RuleStep(f, getattr(f, "__name__", None), when)
                                     for f in functions)
            return functions[0] if functions else None

        return declare(*rules) if rules else declare

    def __repr__(self) -> str:
        shown = (f"{phase}=({', '.join(str(step.name) for step in steps)})"
                 for phase, steps in self.steps.items() if steps)
        return f"Rules({', '.join(shown)})"

    def supersede(self, *rules: str, when: Callable[[Any], bool]) -> None:
        """Skip other plugins' rules (named ``"plugin.rule"``) whenever ``when`` holds."""
        self.superseded.extend((rule, when) for rule in rules)

    def normalize(self, *rules: Rule, when: Callable[[Any], bool] | None = None) -> Any:
        """Declare normalizations; returns the first, so it works as a decorator."""
        return self._declare("normalize", rules, when)

    def derive(self, *rules: Rule, when: Callable[[Any], bool] | None = None) -> Any:
        """Declare derivations; returns the first, so it works as a decorator."""
        return self._declare("derive", rules, when)

    def validate(self, *rules: Rule, when: Callable[[Any], bool] | None = None) -> Any:
        """Declare checks; returns the first, so it works as a decorator."""
        return self._declare("validate", rules, when)


class PluginInfo(FrozenRecord):
    """What a plugin module declares about itself as ``megaplug_plugin = PluginInfo(...)``.

    ``after`` names plugins whose hooks must run before this one's (each must exist,
    though it may be blocked or unavailable); ``before`` names plugins this one must
    precede when they are present. ``requires`` lists optional packages: when one is
    missing the plugin is *unavailable* and adds no flags. ``rules`` are the plugin's
    normalizations, derivations and checks (see :class:`Rules`).
    """

    __slots__ = ("name", "description", "version", "after", "before", "requires", "rules")
    _hidden = ("rules",)  # code, not a fact about the plugin: no part in equality or repr
    name: str
    description: str
    version: str | None
    after: tuple[str, ...]
    before: tuple[str, ...]
    requires: tuple[Requirement, ...]
    rules: Rules

    def __init__(
        self,
        name: str,
        description: str = "",
        version: str | None = None,
        after: str | Iterable[str] = (),
        before: str | Iterable[str] = (),
        requires: str | Requirement | Iterable[str | Requirement] = (),
        rules: Rules | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "version", version)
        object.__setattr__(self, "after", _as_tuple(after))
        object.__setattr__(self, "before", _as_tuple(before))
        object.__setattr__(self, "requires", tuple(
            Requirement(r) if isinstance(r, str) else r for r in _as_tuple(requires)))
        object.__setattr__(self, "rules", Rules() if rules is None else rules)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    """One name (or requirement) or several, as a tuple."""
    if isinstance(value, (str, Requirement)):
        return (value,)
    return tuple(value)


class Status(str, enum.Enum):
    """Where a plugin stands. Compares and prints as its value (``"active"``)."""

    ACTIVE = "active"          # registered: its hooks run
    BLOCKED = "blocked"        # -p no:NAME / MEGAPLUG_DISABLE: never imported on a resolve
    UNAVAILABLE = "unavailable"  # a required package is missing: it adds no flags
    BROKEN = "broken"          # failed to import, register, order or declare

    def __str__(self) -> str:
        return self.value


ACTIVE, BLOCKED, UNAVAILABLE, BROKEN = Status


class PluginRecord(MutableRecord):
    """Everything megaplug knows about one plugin, whatever its status.

    ``loader`` is set for a blocked plugin: how to import it, used only to name it in an
    error message.
    """

    __slots__ = ("name", "status", "source", "reason", "module", "info", "entry_point",
                 "distribution", "version", "hooks", "loader")
    _hidden = ("loader",)

    def __init__(
        self,
        name: str,
        status: Status,
        source: str,
        reason: str = "",
        module: Any = None,
        info: PluginInfo | None = None,
        entry_point: str | None = None,
        distribution: str | None = None,
        version: str | None = None,
        hooks: tuple[str, ...] = (),
        loader: Any = None,
    ) -> None:
        self.name = name
        self.status = status
        self.source = source
        self.reason = reason
        self.module = module
        self.info = info
        self.entry_point = entry_point
        self.distribution = distribution
        self.version = version
        self.hooks = hooks
        self.loader = loader

    @property
    def after(self) -> tuple[str, ...]:
        return self.info.after if self.info else ()

    @property
    def before(self) -> tuple[str, ...]:
        return self.info.before if self.info else ()

    def where(self) -> str:
        """'entry point X (distribution Y)' style description for error messages."""
        parts = []
        if self.entry_point:
            parts.append(f"entry point {self.entry_point}")
        if self.distribution:
            parts.append(f"distribution {self.distribution}")
        return ", ".join(parts) or self.source

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "distribution": self.distribution,
            "entry_point": self.entry_point,
            "source": self.source,
            "status": self.status.value,
            "reason": self.reason,
            "hooks": list(self.hooks),
            "after": list(self.after),
            "before": list(self.before),
            "requires": [str(r) for r in self.info.requires] if self.info else [],
        }


class PluginSelection(MutableRecord):
    """Which plugins to load beyond the built-ins, and which to block."""

    __slots__ = ("load", "block", "autoload")

    def __init__(self, load: Iterable[str] = (), block: Iterable[str] = (),
                 autoload: bool = True) -> None:
        self.load: list[str] = list(load)
        self.block: set[str] = set(block)
        self.autoload = autoload

    @classmethod
    def from_environment(cls, environ: Any = None) -> "PluginSelection":
        env = os.environ if environ is None else environ
        selection = cls()
        selection.load.extend(_split_names(env.get("MEGAPLUG_PLUGINS", "")))
        selection.block.update(_split_names(env.get("MEGAPLUG_DISABLE", "")))
        if env.get("MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD", "").strip() not in ("", "0"):
            selection.autoload = False
        return selection

    def take_from_argv(self, argv: Sequence[str]) -> list[str]:
        """Consume ``-p NAME`` / ``-p no:NAME`` / ``--no-autoload`` tokens; return the rest."""
        rest: list[str] = []
        tokens = iter(argv)
        for token in tokens:
            if token == "--":
                rest.append(token)
                rest.extend(tokens)
                break
            if token == "-p":
                name = next(tokens, None)
                if name is None:
                    rest.append(token)
                    break
                self._apply(name)
            elif token.startswith("-p") and len(token) > 2 and not token.startswith("--"):
                self._apply(token[2:].lstrip("="))
            elif token == "--no-autoload":
                self.autoload = False
            else:
                rest.append(token)
        return rest

    def _apply(self, name: str) -> None:
        if name.startswith("no:"):
            self.block.add(name[3:])
        else:
            self.load.append(name)


def _split_names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _entry_points() -> list[Any]:
    from ._discovery import entry_points

    return entry_points()


def _dist_of(entry_point: Any) -> tuple[str | None, str | None]:
    if hasattr(entry_point, "distribution"):
        return entry_point.distribution, entry_point.version
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return None, None
    return dist.metadata["Name"], dist.version


#: pluggy options that order or wrap calls across plugins; megaplug's order is declared.
_CALL_ORDER_OPTIONS = ("tryfirst", "trylast", "hookwrapper", "wrapper")


class _Manager(pluggy.PluginManager):
    """pluggy's manager with a cheap first look at module attributes.

    pluggy examines every attribute of a plugin with ``inspect.getattr_static``, which for
    a plugin module full of imports is most of megaplug's start-up. A module's attribute
    can only be a hook implementation if it carries megaplug's marker, so the others are
    skipped at a dictionary lookup; every marked one still goes through pluggy's own
    checks (and an unknown marked name still fails ``check_pending``).
    """

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        if isinstance(plugin, types.ModuleType) and not hasattr(
                vars(plugin).get(name), "megaplug_impl"):
            return None
        return super().parse_hookimpl_opts(plugin, name)


class PluginSet:
    """The loaded plugins of one process: records for all, a pluggy manager for the active.

    Built-ins come first, then entry points (unless autoloading is off), then modules
    named by ``MEGAPLUG_PLUGINS`` / ``-p``. Blocking happens before import, so a
    blocked plugin's code never runs.
    """

    def __init__(
        self,
        selection: PluginSelection | None = None,
        *,
        builtins: Iterable[str | types.ModuleType | object] = BUILTIN_PLUGINS,
        extra: Iterable[object] = (),
        local: TargetEnvironment | None = None,
        tolerant: bool = False,
    ) -> None:
        started = time.perf_counter()
        self.selection = selection or PluginSelection()
        #: Mark plugins with impossible ordering broken instead of raising (``megaplug list``).
        self.tolerant = tolerant
        self.local = local or TargetEnvironment()
        self.records: dict[str, PluginRecord] = {}
        self.manager = _Manager("megaplug")
        self.manager.add_hookspecs(hookspecs)
        for item in builtins:
            self._load_object(item, source="builtin")
        if self.selection.autoload:
            for entry_point in _entry_points():
                self._load_entry_point(entry_point)
        for name in self.selection.load:
            self._load_named(name)
        for item in extra:
            self._load_object(item, source="extra")
        self.order = self._resolve_order()
        #: Seconds spent finding, importing and ordering plugins.
        self.discovery_seconds = time.perf_counter() - started

    # -- loading ---------------------------------------------------------------------

    def _load_named(self, name: str) -> None:
        if name in self.records:
            return
        if not self.selection.autoload:
            for entry_point in _entry_points():
                if entry_point.name == name:
                    self._load_entry_point(entry_point, source="-p")
                    return
        self._load_object(name, source="-p / MEGAPLUG_PLUGINS")

    def _load_entry_point(self, entry_point: Any, source: str = "entry point") -> None:
        dist_name, dist_version = _dist_of(entry_point)
        where = f"{entry_point.name} = {entry_point.value}"
        if entry_point.name in self.selection.block:
            self._add(PluginRecord(entry_point.name, BLOCKED, source, "blocked by -p no: / "
                                   "MEGAPLUG_DISABLE", entry_point=where,
                                   distribution=dist_name, version=dist_version,
                                   loader=entry_point.load))
            return
        if entry_point.name in self.records:
            return
        try:
            module = entry_point.load()
        except Exception as exc:  # a broken third-party plugin must not take megaplug down
            self._add(PluginRecord(entry_point.name, BROKEN, source,
                                   f"import failed: {type(exc).__name__}: {exc}",
                                   entry_point=where, distribution=dist_name,
                                   version=dist_version))
            return
        self._register(module, source, entry_point=where, distribution=dist_name,
                       version=dist_version, fallback_name=entry_point.name)

    def _load_object(self, item: Any, source: str) -> None:
        if isinstance(item, str):
            if item.rsplit(".", 1)[-1] in self.selection.block or item in self.selection.block:
                self._add(PluginRecord(item.rsplit(".", 1)[-1], BLOCKED, source,
                                       "blocked by -p no: / MEGAPLUG_DISABLE",
                                       loader=lambda: importlib.import_module(item)))
                return
            try:
                module = importlib.import_module(item)
            except Exception as exc:
                self._add(PluginRecord(item.rsplit(".", 1)[-1], BROKEN, source,
                                       f"import of {item} failed: {type(exc).__name__}: {exc}"))
                return
            item = module
        distribution = version = None
        if source == "builtin":
            distribution, version = "megaplug", __version__
        self._register(item, source, distribution=distribution, version=version,
                       fallback_name=getattr(item, "__name__", repr(item)))

    def _register(self, plugin: Any, source: str, *, entry_point: str | None = None,
                  distribution: str | None = None, version: str | None = None,
                  fallback_name: str) -> None:
        info = getattr(plugin, "megaplug_plugin", None)
        if not isinstance(info, PluginInfo):
            info = None
        name = info.name if info else fallback_name.rsplit(".", 1)[-1]
        record = PluginRecord(name, ACTIVE, source, info=info, module=plugin,
                              entry_point=entry_point, distribution=distribution,
                              version=info.version if info and info.version else version,
                              hooks=_implemented_hooks(plugin, info))
        if name in self.records:
            if self.records[name].module is plugin:
                return  # the same module again (an entry point and plugins=[module])
            raise PluginError(f"two plugins are named {name!r}: "
                              f"{self.records[name].where()} and {record.where()}")
        if name in self.selection.block:
            record.status, record.reason = BLOCKED, "blocked by -p no: / MEGAPLUG_DISABLE"
        elif missing := self._missing_requirements(info):
            record.status, record.reason = UNAVAILABLE, "; ".join(missing)
        elif problem := self._registration_problem(plugin, name, _implemented_hooks(plugin)):
            record.status, record.reason = BROKEN, problem
        self._add(record)

    def _missing_requirements(self, info: PluginInfo | None) -> list[str]:
        requirements = info.requires if info else ()
        found = (self.local.requirement_problem(r.import_name, r.min_version)
                 for r in requirements)
        return [problem for problem in found if problem]

    def _registration_problem(self, plugin: Any, name: str,
                              hooks: tuple[str, ...]) -> str | None:
        """Register with pluggy, which validates each hook; ``None`` when all is well.

        ``register`` refuses an argument the hook does not offer; ``check_pending``
        refuses a hook name no spec declares (a misspelt ``validat``).
        """
        for hook in hooks:
            options = getattr(plugin, hook).megaplug_impl
            refused = [option for option in _CALL_ORDER_OPTIONS if options.get(option)]
            if refused:
                return (f"hook {hook} uses {refused[0]}=True; megaplug runs plugins in the "
                        "order PluginInfo(after=..., before=...) declares, each on its own, "
                        "so pluggy's call-order options are refused")
        try:
            self.manager.register(plugin, name=name)
            self.manager.check_pending()
        except Exception as exc:
            if self.manager.is_registered(plugin):
                self.manager.unregister(plugin)
            detail = str(exc).replace("\n", "; ")
            return (f"registration failed: {type(exc).__name__}: {detail}"
                    f" (megaplug's hooks are {', '.join(hookspecs.HOOKS)})")
        return None

    def _add(self, record: PluginRecord) -> None:
        self.records.setdefault(record.name, record)

    # -- ordering --------------------------------------------------------------------

    def _resolve_order(self) -> list[str]:
        active = sorted(n for n, r in self.records.items() if r.status == ACTIVE)
        known = set(self.records)
        edges: dict[str, set[str]] = {name: set() for name in active}
        for name in active:
            record = self.records[name]
            for first in record.after:
                if first not in known:
                    return self._ordering_failure([name], (
                        f"plugin {name!r} ({record.where()}) must run after {first!r}, "
                        f"which is not installed"))
                if first in edges:
                    edges[first].add(name)
            for later in record.before:
                if later in edges:
                    edges[name].add(later)
        incoming = {name: 0 for name in active}
        for targets in edges.values():
            for target in targets:
                incoming[target] += 1
        ready = [name for name, count in incoming.items() if count == 0]
        heapq.heapify(ready)
        order: list[str] = []
        while ready:
            name = heapq.heappop(ready)
            order.append(name)
            for target in sorted(edges[name]):
                incoming[target] -= 1
                if incoming[target] == 0:
                    heapq.heappush(ready, target)
        if len(order) != len(active):
            stuck = {n for n in active if n not in order}
            cycle = _on_a_cycle(stuck, edges) or sorted(stuck)
            return self._ordering_failure(cycle, (
                "plugin ordering has a cycle among: " + ", ".join(cycle)
                + " (check their after=/before= declarations)"))
        return order

    def _ordering_failure(self, names: list[str], message: str) -> list[str]:
        """Raise, or when tolerant mark ``names`` broken and order the rest."""
        if not self.tolerant:
            raise PluginError(message)
        for name in names:
            record = self.records[name]
            record.status, record.reason = BROKEN, message
            self.manager.unregister(name=name)
        return self._resolve_order()

    # -- queries ---------------------------------------------------------------------

    def active(self) -> list[PluginRecord]:
        return [self.records[name] for name in self.order]

    def inactive(self) -> list[PluginRecord]:
        return [r for n, r in sorted(self.records.items()) if r.status != ACTIVE]


def _on_a_cycle(stuck: set[str], edges: dict[str, set[str]]) -> list[str]:
    """The stuck plugins that lie on a cycle (the rest merely follow one)."""
    def reaches(start: str, goal: str) -> bool:
        seen, pending = set(), [start]
        while pending:
            for target in edges[pending.pop()] & stuck:
                if target == goal:
                    return True
                if target not in seen:
                    seen.add(target)
                    pending.append(target)
        return False

    return sorted(name for name in stuck if reaches(name, name))


def _implemented_hooks(plugin: Any, info: PluginInfo | None = None) -> tuple[str, ...]:
    """The hooks a plugin implements (whether or not it registers); with ``info``, also the
    phases it declares rules for."""
    rules = info.rules.steps if info else {}
    return tuple(hook for hook in hookspecs.HOOKS
                 if hasattr(getattr(plugin, hook, None), "megaplug_impl") or rules.get(hook))
