"""Values with provenance: the draft plugins work on, and the resolved result."""

from __future__ import annotations

import argparse
import dataclasses
from types import MappingProxyType
from typing import Any, Iterator, Mapping

from ._errors import Problem, ProblemSink
from ._record import FrozenRecord
from ._registry import FlagTable
from ._target import TargetEnvironment

#: Where a value can come from, lowest precedence first.
SOURCES = (
    "default",
    "caller-default",
    "config-file",
    "environment",
    "command-line",
    "checkpoint",
    "normalized",
    "derived",
)

#: Sources that mean "the user (or calling script) asked for this value".
GIVEN_SOURCES = frozenset(
    {"caller-default", "config-file", "environment", "command-line", "checkpoint"}
)


class Provenance(FrozenRecord):
    """Where a value came from, and what it replaced.

    ``source`` is one of :data:`SOURCES`; ``detail`` is the file, spelling or variable;
    ``plugin`` is the plugin that set it (for normalized / derived values) or owns it, and
    ``rule`` the declared rule of that plugin that set it; ``inputs`` are the settings it
    was computed from. For the given sources (command line, files, environment, caller,
    checkpoint) ``value`` is the value as given, before any plugin changed it; it takes no
    part in comparisons.
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
        set_field = object.__setattr__
        set_field(self, "source", source)
        set_field(self, "detail", detail)
        set_field(self, "plugin", plugin)
        set_field(self, "inputs", inputs)
        set_field(self, "reason", reason)
        set_field(self, "previous", previous)
        set_field(self, "value", value)
        set_field(self, "rule", rule)

    def describe(self) -> str:
        if self.source in ("normalized", "derived"):
            text = f"{self.source} by {self.plugin}"
            if self.inputs:
                text += " from " + ", ".join(self.inputs)
            if self.reason:
                text += f" ({self.reason})"
            return text
        text = {
            "default": "declared default",
            "caller-default": "caller default (args_defaults)",
            "config-file": "config file",
            "environment": "environment variable",
            "command-line": "command line",
            "checkpoint": "checkpoint arguments",
        }.get(self.source, self.source)
        if self.detail:
            text += f" {self.detail}"
        if self.source == "default" and self.plugin:
            text += f" of {self.plugin}"
        return text

    def history(self) -> list["Provenance"]:
        """This record and everything it replaced, newest first."""
        chain: list[Provenance] = []
        node: Provenance | None = self
        while node is not None:
            chain.append(node)
            node = node.previous
        return chain

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "detail": self.detail,
            "plugin": self.plugin,
            "rule": self.rule,
            "inputs": list(self.inputs),
            "reason": self.reason,
            "description": self.describe(),
        }


_NOT_GIVEN = object()


def _given_value(record: Provenance | None, default: Any) -> Any:
    """The newest value a given source (command line, file, ...) supplied in ``record``'s
    history, or ``default``."""
    for step in record.history() if record is not None else ():
        if step.source in GIVEN_SOURCES:
            return step.value
    return default


class ReadOnlyError(AttributeError):
    """Raised when a value is changed where it may not be (validate, a resolved config)."""


class Draft:
    """The configuration while plugins work on it.

    Read values as attributes (``config.num_layers``), by key, or with ``get`` (which
    returns a default for settings of plugins that are not installed). In ``normalize``
    and ``derive``, change them with ``set`` and ``discard``; in ``validate`` the draft is
    read-only. Report with ``error`` and ``warn``; ``env`` is the target environment.
    """

    __slots__ = ("_values", "_provenance", "_removed", "_table", "_sink", "env", "phase",
                 "_read_only")

    def __init__(self, values: dict[str, Any], provenance: dict[str, Provenance],
                 table: FlagTable, sink: ProblemSink, env: TargetEnvironment) -> None:
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_provenance", provenance)
        object.__setattr__(self, "_removed", {})
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "_sink", sink)
        object.__setattr__(self, "env", env)
        object.__setattr__(self, "phase", "parse")
        object.__setattr__(self, "_read_only", False)

    # -- reading ---------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(self._unknown(name)) from None

    def __getitem__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise KeyError(self._unknown(name)) from None

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def get(self, name: str, default: Any = None) -> Any:
        """The value, or ``default`` when no installed plugin declares ``name``."""
        return self._values.get(name, default)

    def given(self, name: str) -> bool:
        """Whether the user or caller supplied the value (as opposed to a default)."""
        record = self._provenance.get(name)
        while record is not None and record.source in ("normalized", "derived"):
            record = record.previous
        return record is not None and record.source in GIVEN_SOURCES

    def given_value(self, name: str, default: Any = None) -> Any:
        """The value as the user or caller gave it, before any plugin changed it
        (``default`` when it was not given)."""
        return _given_value(self._provenance.get(name), default)

    def source(self, name: str) -> Provenance | None:
        return self._provenance.get(name)

    def to_dict(self) -> dict[str, Any]:
        """A copy of the current values."""
        return dict(self._values)

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

    # -- changing --------------------------------------------------------------------

    def set(self, name: str, value: Any, *, reason: str = "",
            inputs: tuple[str, ...] | list[str] = ()) -> None:
        """Change a value, recording who changed it, why and from what."""
        self._check_writable(name)
        if name not in self._values and name not in self._table:
            raise KeyError(
                f"plugin {self._sink.current_plugin!r} sets {name!r}, which no plugin declares "
                "(declare it with Computed() in an options dataclass)"
            )
        source = "normalized" if self.phase == "normalize" else "derived"
        if self.phase not in ("normalize", "derive"):
            source = self.phase
        self._values[name] = value
        self._provenance[name] = Provenance(
            source, "", self._sink.current_plugin, tuple(inputs), reason,
            self._provenance.get(name), rule=self._sink.current_rule,
        )

    def discard(self, name: str, *, reason: str = "") -> None:
        """Drop a retired setting from the result (Megatron's ``del args.x``)."""
        self._check_writable(name)
        if name in self._values:
            del self._values[name]
            self._removed[name] = self._sink.current_plugin or "kernel"

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError(
            f"use config.set({name!r}, value, reason=...) so the change is recorded"
        )

    def _check_writable(self, name: str) -> None:
        if self._read_only:
            raise ReadOnlyError(
                f"plugin {self._sink.current_plugin!r} tried to change {name!r} during "
                f"{self.phase}; validate must only report problems"
            )

    # -- reporting -------------------------------------------------------------------

    def error(self, message: str, *, flags: tuple[str, ...] | list[str] = (),
              hint: str | None = None) -> None:
        """Report a problem; flags may be dests or option strings."""
        self._sink.error(message, flags=[self._table.spelling(f) for f in flags], hint=hint)

    def warn(self, message: str, *, flags: tuple[str, ...] | list[str] = ()) -> None:
        self._sink.warn(message, flags=[self._table.spelling(f) for f in flags])


class Resolved:
    """A resolved, read-only configuration.

    Attribute and key access give values; ``source(dest)`` gives provenance;
    ``to_namespace()`` / ``to_dict()`` give plain copies; ``options(plugin)`` gives the
    plugin's options dataclass filled with resolved values.
    """

    __slots__ = ("_values", "_provenance", "_table", "warnings", "plugins")

    def __init__(self, values: Mapping[str, Any], provenance: Mapping[str, Provenance],
                 table: FlagTable, warnings: list[Problem], plugins: list[str]) -> None:
        object.__setattr__(self, "_values", MappingProxyType(dict(values)))
        object.__setattr__(self, "_provenance", MappingProxyType(dict(provenance)))
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "warnings", tuple(warnings))
        object.__setattr__(self, "plugins", tuple(plugins))

    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"no setting {name!r} in the resolved configuration") from None

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise ReadOnlyError("a resolved configuration is read-only; use to_namespace() for a copy")

    def __delattr__(self, name: str) -> None:
        raise ReadOnlyError("a resolved configuration is read-only")

    def __repr__(self) -> str:
        return f"<Resolved {len(self._values)} settings from {len(self.plugins)} plugins>"

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def source(self, name: str) -> Provenance:
        """How ``name`` got its value."""
        return self._provenance[name]

    def provenance(self) -> Mapping[str, Provenance]:
        return self._provenance

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)

    def given_values(self) -> dict[str, Any]:
        """The settings the user or caller supplied, as supplied (before normalize/derive).

        Dumped to a config file and resolved again, they reproduce this configuration.
        """
        return {name: value for name, record in self._provenance.items()
                if (value := _given_value(record, _NOT_GIVEN)) is not _NOT_GIVEN}

    def to_namespace(self, *, torch_types: bool = False) -> argparse.Namespace:
        """A plain ``argparse.Namespace`` copy; ``torch_types`` turns dtypes into ``torch.dtype``."""  # noqa: E501
        values = dict(self._values)
        if torch_types:
            from ._values import to_torch

            values = {k: to_torch(v) for k, v in values.items()}
        return argparse.Namespace(**values)

    def options(self, plugin: str | type) -> Any:
        """The plugin's options dataclass (by plugin name or class) filled with resolved values."""
        table = self._table
        if isinstance(plugin, str):
            cls = table.options_classes[plugin]
        else:
            cls = plugin
        kwargs = {f.name: self._values[f.name] for f in dataclasses.fields(cls)
                  if f.init and f.name in self._values}
        return cls(**kwargs)
