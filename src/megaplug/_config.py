"""Values with provenance: the draft plugins work on, and the resolved result."""

from __future__ import annotations

import argparse
from types import MappingProxyType

from ._errors import Problem, ProblemSink
from ._record import FrozenRecord
from ._registry import FlagTable
from .environment import TargetEnvironment
from .values._encoding import deep_copy
from .values._read_log import read_log

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Iterator, Mapping

#: Where a value can come from, lowest precedence first.
SOURCES = ("default", "caller-default", "config-file", "environment", "command-line",
           "checkpoint", "normalized", "derived")
#: Sources that mean "the user (or calling script) asked for this value".
GIVEN_SOURCES = frozenset(SOURCES[1:6])

_DESCRIPTIONS = {"default": "declared default", "caller-default": "caller default (args_defaults)",
                 "config-file": "config file", "environment": "environment variable",
                 "command-line": "command line", "checkpoint": "checkpoint arguments"}


class Provenance(FrozenRecord):
    """Where a value came from, and what it replaced.

    ``source`` is one of :data:`SOURCES`; ``detail`` the file, spelling or variable;
    ``plugin`` the plugin that set the value (normalized / derived) or owns it, ``rule`` its
    rule that set it, ``inputs`` the settings it was computed from. ``value`` is the value as
    a given source gave it, before any plugin changed it; it takes no part in comparisons.
    """

    __slots__ = ("source", "detail", "plugin", "inputs", "reason", "previous", "value", "rule")
    _hidden = ("value",)
    source: str
    detail: str
    plugin: str | None
    inputs: tuple[str, ...]
    reason: str
    previous: Provenance | None
    value: Any
    rule: str | None

    def __init__(self, source: str, detail: str = "", plugin: str | None = None,
                 inputs: tuple[str, ...] = (), reason: str = "",
                 previous: Provenance | None = None, value: Any = None,
                 rule: str | None = None) -> None:
        self._fill(locals())

    def describe(self) -> str:
        if self.source in ("normalized", "derived"):
            return (f"{self.source} by {self.plugin}"
                    + (" from " + ", ".join(self.inputs) if self.inputs else "")
                    + (f" ({self.reason})" if self.reason else ""))
        return (_DESCRIPTIONS.get(self.source, self.source)
                + (f" {self.detail}" if self.detail else "")
                + (f" of {self.plugin}" if self.source == "default" and self.plugin else ""))

    def history(self) -> list[Provenance]:
        """This record and everything it replaced, newest first."""
        chain = [self]
        while chain[-1].previous is not None:
            chain.append(chain[-1].previous)  # type: ignore[arg-type]
        return chain

    def to_dict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in ("source", "detail", "plugin", "rule")},
                "inputs": list(self.inputs), "reason": self.reason,
                "description": self.describe()}


_NOT_GIVEN = object()


def _given_value(record: Provenance | None, default: Any) -> Any:
    """The newest value a given source supplied in ``record``'s history, or ``default``."""
    for step in record.history() if record is not None else ():
        if step.source in GIVEN_SOURCES:
            return step.value
    return default


class ReadOnlyError(AttributeError):
    """Raised when a value is changed where it may not be (validate, a resolved config)."""


class _Settings:
    """Reading settings by attribute, key, membership, iteration and ``get``."""

    __slots__ = ()
    _values: Mapping[str, Any]
    _provenance: Mapping[str, Provenance]

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(self._unknown(name)) from None

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(self._unknown(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def get(self, name: str, default: Any = None) -> Any:
        """The value, or ``default`` when no installed plugin declares ``name``."""
        return self._values.get(name, default)

    def source(self, name: str) -> Provenance | None:
        """How ``name`` got its value."""
        return self._provenance.get(name)

    def to_dict(self) -> dict[str, Any]:
        """A copy of the values."""
        return dict(self._values)

    def _unknown(self, name: str) -> str:
        return f"no setting {name!r} in the resolved configuration"


class Draft(_Settings):
    """The configuration while plugins work on it: read like :class:`Resolved`, changed
    with ``set`` and ``discard`` in normalize and derive (read-only in validate), reported on
    with ``error`` and ``warn``; ``env`` is the target environment.
    """

    __slots__ = ("_values", "_provenance", "_removed", "_table", "_sink", "env", "phase",
                 "_plugin", "_rule")

    def __init__(self, values: dict[str, Any], provenance: dict[str, Provenance],
                 table: FlagTable, sink: ProblemSink, env: TargetEnvironment) -> None:
        for name, value in (("_values", values), ("_provenance", provenance), ("_removed", {}),
                            ("_table", table), ("_sink", sink), ("env", env),
                            ("phase", "parse"), ("_plugin", None), ("_rule", None)):
            object.__setattr__(self, name, value)

    def for_rule(self, phase: str, plugin: str, rule: str | None,
                 _set: Any = object.__setattr__) -> Draft:
        """The same configuration as one rule of ``plugin`` sees it in ``phase``: what it
        sets and reports is recorded as that rule's (read-only in validate)."""
        view = object.__new__(Draft)  # one per rule run: each assignment spelled out
        _set(view, "_values", self._values), _set(view, "_provenance", self._provenance)
        _set(view, "_removed", self._removed), _set(view, "_table", self._table)
        _set(view, "_sink", self._sink), _set(view, "env", self.env)
        _set(view, "phase", phase), _set(view, "_plugin", plugin), _set(view, "_rule", rule)
        return view

    def watch_reads(self) -> set[str]:
        """The names this view reads from now on, filled in as it reads them (through a log;
        what it sets still reaches the draft): a rule's reads, after a value was refused."""
        read: set[str] = set()
        object.__setattr__(self, "_values", read_log(self._values, read))
        return read

    def mutable_values(self) -> dict[str, Any]:
        """A deep copy of every list, dict and set value: what a read-only phase compares
        with :meth:`undo_changes` after each rule."""
        return {k: deep_copy(v) for k, v in self._values.items()
                if isinstance(v, (list, dict, set))}

    def undo_changes(self, copies: dict[str, Any]) -> list[str]:
        """The settings changed in place since ``copies`` were taken, each put back."""
        changed = sorted(k for k, v in copies.items() if self._values.get(k) != v)
        for name in changed:
            self._values[name] = deep_copy(copies[name])
        return changed

    def resolved(self, plugins: list[str]) -> Resolved:
        """The read-only result, once every phase has run."""
        return Resolved(self._values, self._provenance, self._table, self._sink.warnings,
                        plugins)

    def given(self, name: str) -> bool:
        """Whether the user or caller supplied the value (as opposed to a default)."""
        return _given_value(self._provenance.get(name), _NOT_GIVEN) is not _NOT_GIVEN

    def given_value(self, name: str, default: Any = None) -> Any:
        """The value as the user or caller gave it, before any plugin changed it
        (``default`` when it was not given)."""
        return _given_value(self._provenance.get(name), default)

    def provenance(self) -> dict[str, Provenance]:
        """A copy of the current provenance, by setting."""
        return dict(self._provenance)

    def spelling(self, name: str) -> str:
        """The flag spelling to show the user for a dest (``num_experts`` -> ``--num-experts``)."""
        return self._table.spelling(name)

    def _unknown(self, name: str) -> str:
        if name in self._removed:
            return f"setting {name!r} was removed by plugin {self._removed[name]!r}"
        return f"no installed plugin declares the setting {name!r}"

    def set(self, name: str, value: Any, *, reason: str = "",
            inputs: tuple[str, ...] | list[str] = ()) -> None:
        """Change a value, recording who changed it (plugin and rule), why and from what."""
        self._check_writable(name)
        if name not in self._values and name not in self._table:
            raise KeyError(f"plugin {self._plugin!r} sets {name!r}, which no "
                           "plugin declares (declare it with Computed() in an options dataclass)")
        source = {"normalize": "normalized", "derive": "derived"}.get(self.phase, self.phase)
        self._values[name] = value
        self._provenance[name] = Provenance(source, "", self._plugin, tuple(inputs),
                                            reason, self._provenance.get(name), rule=self._rule)

    def settle(self, values: Mapping[str, Any], provenance: Mapping[str, Provenance]) -> None:
        """Put settings in place outside any rule (the kernel: what the release lacks)."""
        self._values.update(values)
        self._provenance.update(provenance)

    def withdraw(self, names: Iterable[str]) -> dict[str, tuple[Any, Provenance | None]]:
        """Take settings out, outside any rule: name -> (value, provenance)."""
        return {name: (self._values.pop(name, None), self._provenance.pop(name, None))
                for name in names}

    def discard(self, name: str, *, reason: str = "") -> None:
        """Drop a retired setting from the result (Megatron's ``del args.x``)."""
        self._check_writable(name)
        if name in self._values:
            del self._values[name]
            self._removed[name] = self._plugin or "kernel"

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError(f"use config.set({name!r}, value, reason=...) so the change is "
                            "recorded")

    def _check_writable(self, name: str) -> None:
        if self.phase == "validate":
            raise ReadOnlyError(f"plugin {self._plugin!r} tried to change "
                                f"{name!r} during {self.phase}; validate must only report "
                                "problems")

    def error(self, message: str, *, flags: tuple[str, ...] | list[str] = (),
              hint: str | None = None) -> None:
        """Report a problem; flags may be dests or option strings."""
        self._sink.error(message, flags=[self._table.spelling(f) for f in flags], hint=hint,
                         plugin=self._plugin, rule=self._rule)

    def warn(self, message: str, *, flags: tuple[str, ...] | list[str] = ()) -> None:
        """Report something suspicious that does not stop the resolve."""
        self._sink.warn(message, flags=[self._table.spelling(f) for f in flags],
                        plugin=self._plugin, rule=self._rule)


class Resolved(_Settings):
    """A resolved, read-only configuration: values by attribute or key, provenance by
    ``source``."""

    __slots__ = ("_values", "_provenance", "_table", "warnings", "plugins")

    def __init__(self, values: Mapping[str, Any], provenance: Mapping[str, Provenance],
                 table: FlagTable, warnings: list[Problem], plugins: list[str]) -> None:
        for name, value in (("_values", MappingProxyType(dict(values))),
                            ("_provenance", MappingProxyType(dict(provenance))),
                            ("_table", table), ("warnings", tuple(warnings)),
                            ("plugins", tuple(plugins))):
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError("a resolved configuration is read-only; use to_namespace() for a copy")

    def __delattr__(self, name: str) -> None:
        raise ReadOnlyError("a resolved configuration is read-only")

    def __repr__(self) -> str:
        return f"<Resolved {len(self._values)} settings from {len(self.plugins)} plugins>"

    def __copy__(self) -> Resolved:
        return self  # read-only: a copy would be the same

    def __deepcopy__(self, memo: dict[int, Any]) -> Resolved:
        from .values._encoding import deep_copy

        return Resolved({name: deep_copy(value) for name, value in self._values.items()},
                        self._provenance, self._table, list(self.warnings), list(self.plugins))

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by value: values, provenance, warnings and plugins; of the flag table (its
        parsers are code) only the options classes :meth:`options` names, by reference."""
        table = FlagTable.assemble((), options_classes={
            plugin: found if isinstance(found, str) else f"{found.__module__}:{found.__qualname__}"
            for plugin, found in (self._table.options_classes if self._table else {}).items()})
        return Resolved, (dict(self._values), dict(self._provenance), table,
                          list(self.warnings), list(self.plugins))

    def source(self, name: str) -> Provenance:
        """How ``name`` got its value."""
        return self._provenance[name]

    def provenance(self) -> Mapping[str, Provenance]:
        """The provenance of every setting (read-only)."""
        return self._provenance

    def given_values(self) -> dict[str, Any]:
        """The settings the user or caller supplied, as supplied (before normalize/derive).

        Dumped to a config file and resolved again, they reproduce this configuration.
        """
        return {name: deep_copy(value) for name, record in self._provenance.items()
                if (value := _given_value(record, _NOT_GIVEN)) is not _NOT_GIVEN}  # copies

    def to_namespace(self, *, torch_types: bool = False) -> argparse.Namespace:
        """A plain ``argparse.Namespace`` copy; ``torch_types`` turns dtypes into
        ``torch.dtype``."""
        from .values._types import to_torch

        return argparse.Namespace(**{k: to_torch(v) if torch_types else v
                                     for k, v in self._values.items()})

    def options(self, plugin: str | type) -> Any:
        """The plugin's options dataclass (by plugin name or class) filled with resolved values."""
        cls = self._table.options_class(plugin) if isinstance(plugin, str) else plugin
        import dataclasses  # only where a plugin asks for its options object

        return cls(**{f.name: self._values[f.name] for f in dataclasses.fields(cls)
                      if f.init and f.name in self._values})
