"""The flag table: every setting declared by every plugin, with single ownership."""

from __future__ import annotations

from typing import Any, Iterator, Sequence

from ._errors import PluginError
from ._options import FlagSpec, spec_from_argparse, specs_from_options


class FlagDeclarations:
    """What ``add_args`` receives: the declaring plugin's handle on the flag table.

    ``add_options`` takes an options dataclass; ``add_argument`` takes argparse-style
    arguments (``action`` may be a name or ``argparse.BooleanOptionalAction``).
    ``add_argument_group`` and ``add_mutually_exclusive_group`` return handles with the
    same ``add_argument``, so code written against argparse groups ports directly.
    """

    def __init__(self, table: "FlagTable", plugin: str) -> None:
        self._table = table
        self.plugin = plugin

    def add_options(self, options_class: type) -> None:
        self._table.options_classes[self.plugin] = options_class
        for spec in specs_from_options(options_class, self.plugin):
            self._table.add(spec)

    def add_argument(self, *option_strings: str, **kwargs: Any) -> FlagSpec:
        spec = spec_from_argparse(option_strings, kwargs, self.plugin)
        self._table.add(spec)
        return spec

    def add_argument_group(self, title: str = "", description: str = "") -> "FlagDeclarations":
        return self

    def add_mutually_exclusive_group(self, required: bool = False) -> "_MutexGroup":
        group = _MutexGroup(self)
        self._table.mutex_groups.append(group.dests)
        return group


class _MutexGroup:
    def __init__(self, owner: FlagDeclarations) -> None:
        self._owner = owner
        self.dests: list[str] = []

    def add_argument(self, *option_strings: str, **kwargs: Any) -> FlagSpec:
        spec = self._owner.add_argument(*option_strings, **kwargs)
        self.dests.append(spec.dest)
        return spec


class FlagTable:
    """All specs by dest and by option string; refuses a second owner of either."""

    def __init__(self) -> None:
        self.specs: list[FlagSpec] = []
        self.by_dest: dict[str, list[FlagSpec]] = {}
        self.by_option: dict[str, FlagSpec] = {}
        self.by_env: dict[str, FlagSpec] = {}
        self.options_classes: dict[str, type] = {}
        self.mutex_groups: list[list[str]] = []

    def add(self, spec: FlagSpec) -> None:
        existing = self.by_dest.get(spec.dest)
        if existing and existing[0].plugin != spec.plugin:
            raise PluginError(
                f"plugins {existing[0].plugin!r} and {spec.plugin!r} both declare the "
                f"setting {spec.dest!r}"
            )
        for option in spec.option_strings:
            owner = self.by_option.get(option)
            if owner is not None:
                who = (
                    f"plugins {owner.plugin!r} and {spec.plugin!r} both declare"
                    if owner.plugin != spec.plugin
                    else f"plugin {spec.plugin!r} declares twice"
                )
                raise PluginError(f"{who} the flag {option}")
        if spec.env:
            reader = self.by_env.get(spec.env)
            if reader is not None and reader.dest != spec.dest:
                raise PluginError(
                    f"plugins {reader.plugin!r} and {spec.plugin!r} both read the environment "
                    f"variable {spec.env} (into {reader.dest!r} and {spec.dest!r})")
        self.specs.append(spec)
        self.by_dest.setdefault(spec.dest, []).append(spec)
        for option in spec.option_strings:
            self.by_option[option] = spec
        if spec.env:
            self.by_env[spec.env] = spec

    def __iter__(self) -> Iterator[FlagSpec]:
        return iter(self.specs)

    def __contains__(self, dest: object) -> bool:
        return dest in self.by_dest

    def owner(self, dest: str) -> str | None:
        specs = self.by_dest.get(dest)
        return specs[0].plugin if specs else None

    def default(self, dest: str) -> Any:
        return self.by_dest[dest][0].default

    def spelling(self, name: str) -> str:
        """The user-facing spelling for a dest or option string."""
        if name.startswith("-"):
            return name
        specs = self.by_dest.get(name)
        if specs:
            for spec in specs:
                if spec.option_strings:
                    return spec.option_strings[0]
        return name

    def lookup(self, name: str) -> FlagSpec | None:
        """A spec by dest, option string, or option string without leading dashes."""
        if name in self.by_option:
            return self.by_option[name]
        if name in self.by_dest:
            return self.by_dest[name][0]
        dashed = "--" + name.lstrip("-")
        if dashed in self.by_option:
            return self.by_option[dashed]
        underscored = name.lstrip("-").replace("-", "_")
        if underscored in self.by_dest:
            return self.by_dest[underscored][0]
        return None

    def suggest(self, name: str, candidates: Sequence[str] | None = None) -> str | None:
        import difflib  # only a mistyped flag pays for it

        pool = candidates if candidates is not None else list(self.by_option)
        matches = difflib.get_close_matches(name, pool, n=1, cutoff=0.75)
        return matches[0] if matches else None

    def plugin_specs(self, plugin: str) -> list[FlagSpec]:
        return [s for s in self.specs if s.plugin == plugin]
