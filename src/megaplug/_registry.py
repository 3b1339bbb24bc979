"""The flag table: every setting declared by every plugin, with single ownership. A table is
a value: :func:`declare` builds it, and only this module writes its indexes."""

from __future__ import annotations

import importlib

from ._errors import PluginError
from ._options import FlagSpec, spec_from_argparse, specs_from_options
from ._record import FrozenRecord
from .environment._narrow import narrow
from .environment._release_data import release_data_beside
from .sources._selection import read_by_megaplug

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence


class Declaration(FrozenRecord):
    """How one plugin declares its flags: its ``PluginInfo(options=...)`` and ``add_args``.
    An inactive plugin's flags are only learned (to name it when one is used), except those
    its data gives a release with or without it, with ``releases`` (kitchen's, before 0.16)."""

    __slots__ = ("plugin", "options", "add_args", "active", "releases")
    plugin: str
    options: Any
    add_args: tuple[Callable[[FlagDeclarations], None], ...]
    active: bool
    releases: bool

    def __init__(self, plugin: str, options: Any, add_args: tuple[Callable[..., None], ...],
                 active: bool = True, releases: bool = False) -> None:
        self._fill(locals())


class Declared(FrozenRecord):
    """A plugin set's declaration: ``table``, ``inactive`` specs and ``failures`` by plugin."""

    __slots__ = ("table", "inactive", "failures")
    table: FlagTable
    inactive: dict[str, list[FlagSpec]]
    failures: dict[str, BaseException]

    def __init__(self, table: FlagTable, inactive: dict[str, list[FlagSpec]],
                 failures: dict[str, BaseException]) -> None:
        self._fill(locals())


def declare(declarations: Sequence[Declaration], lines: Mapping[str, str]) -> Declared:
    """The flag table of ``declarations`` (a flag's first owner keeps it) narrowed to
    ``lines`` (package -> release), and the inactive plugins' specs. A plugin whose
    declaration raises fails alone: what it declared stays, its spellings are learned."""
    table, release_data, failures = FlagTable(), {}, {}
    for declaration in (one for one in declarations if one.active):
        flags = FlagDeclarations(table, declaration.plugin)
        try:
            _run(declaration, flags)
        except (Exception, SystemExit) as exc:  # sys.exit() in a plugin must not end megaplug
            failures[declaration.plugin] = exc
            continue
        if flags.release_data is not None:
            release_data[declaration.plugin] = flags.release_data
    inactive: dict[str, list[FlagSpec]] = {}
    for declaration in (one for one in declarations if not one.active or one.plugin in failures):
        shadow = FlagTable()  # of its own: an inactive plugin's flags are only learned
        flags = FlagDeclarations(shadow, declaration.plugin)
        try:
            _run(declaration, flags)
        except (Exception, SystemExit):
            continue
        if declaration.options is not None or declaration.add_args:
            inactive.setdefault(declaration.plugin, list(shadow))
        if flags.release_data is not None and declaration.releases and not declaration.active:
            release_data[declaration.plugin] = flags.release_data
    table.release_data = release_data  # read as the table is narrowed
    return Declared(narrow(table, lines), inactive, failures)


def _run(declaration: Declaration, flags: FlagDeclarations) -> None:
    if declaration.options is not None:
        flags.declare(declaration.options)
    for function in declaration.add_args:
        function(flags)


class FlagDeclarations:
    """What ``add_args`` receives: the declaring plugin's handle on the flag table.

    ``add_options`` takes an options dataclass; ``add_argument`` takes argparse-style
    arguments (``action`` may be a name or ``argparse.BooleanOptionalAction``).
    ``add_argument_group`` and ``add_mutually_exclusive_group`` return handles like this
    one, so code written against argparse groups ports directly.
    """

    def __init__(self, table: "FlagTable", plugin: str,
                 exclusive: list[str] | None = None) -> None:
        self._table = table
        self.plugin = plugin
        self._exclusive = exclusive  # a mutually exclusive group's dests
        #: The release data beside what :meth:`declare` declared (a path), if it ships one.
        self.release_data: str | None = None

    def declare(self, declaration: str | Any) -> None:
        """Declare what ``PluginInfo(options=...)`` names (imported now if a reference): an
        options class, or a function that declares flags on this handle."""
        try:
            found = (resolve_reference(declaration) if isinstance(declaration, str)
                     else declaration)
        except (ImportError, AttributeError) as exc:
            from .sources._declarations import unresolved

            raise PluginError(unresolved(self.plugin, f"options={declaration!r}", declaration,
                                         exc)) from None
        self.release_data = release_data_beside(declaration, found)  # read when narrowed
        if isinstance(found, type):
            self.add_options(found)
        elif callable(found):
            found(self)
        else:
            raise PluginError(f"plugin {self.plugin!r}: options={declaration!r} names neither "
                              "an options class nor a function that declares flags")

    def add_options(self, options_class: type) -> None:
        self._table.options_classes[self.plugin] = options_class
        for spec in specs_from_options(options_class, self.plugin):
            self._table.add(spec)

    def add_argument(self, *option_strings: str, **kwargs: Any) -> FlagSpec:
        spec = spec_from_argparse(option_strings, kwargs, self.plugin)
        self._table.add(spec)
        if self._exclusive is not None:
            self._exclusive.append(spec.dest)
        return spec

    def add_argument_group(self, title: str = "", description: str = "") -> "FlagDeclarations":
        return self

    def add_mutually_exclusive_group(self, required: bool = False) -> "FlagDeclarations":
        group = FlagDeclarations(self._table, self.plugin, exclusive=[])
        self._table.mutex_groups.append(group._exclusive)  # type: ignore[arg-type]
        return group


class FlagTable:
    """All specs by dest and by option string; refuses a second owner of either."""

    def __init__(self) -> None:
        self.specs: list[FlagSpec] = []
        self.by_dest: dict[str, list[FlagSpec]] = {}
        self.by_option: dict[str, FlagSpec] = {}
        self.by_env: dict[str, FlagSpec] = {}
        #: Each plugin's options class, or its ``module:qualname`` until first asked for
        #: (a table read from the snapshot imports no options module it does not use).
        self.options_classes: dict[str, type | str] = {}
        self.mutex_groups: list[list[str]] = []
        #: Each plugin's ``megatron_releases.json`` (a path, read when narrowed: ReleaseData).
        self.release_data: dict[str, Any] = {}
        #: Settings the target's release lacks (by dest), and their spellings -> where they are.
        self.withheld: dict[str, list[FlagSpec]] = {}
        self.elsewhere: dict[str, str] = {}
        self.renamed: dict[str, tuple[str, bool]] = {}  #: dest -> (the release's, inverted)

    @classmethod
    def assemble(cls, specs: Iterable[FlagSpec], **facts: Any) -> FlagTable:
        """A table of ``specs`` (through :meth:`add`) and the facts given (``options_classes``,
        ``mutex_groups``, ``release_data``, ``withheld``, ``elsewhere``, ``renamed``): how a
        narrowed table and one read back from the cache are built, never by writing indexes."""
        table = cls()
        for spec in specs:
            table.add(spec)
        for name, value in facts.items():
            setattr(table, name, dict(value) if name != "mutex_groups" else [
                [dest for dest in group if dest in table.by_dest] for group in value])
        table.withheld = {dest: list(found) for dest, found in table.withheld.items()
                          if dest not in table.by_dest}  # (only some spellings withheld)
        return table

    def add(self, spec: FlagSpec) -> None:
        """Add a spec, or raise ``PluginError`` naming both owners of a dest, option string
        or environment variable."""
        for option in spec.option_strings:
            if taken := read_by_megaplug(option):
                raise PluginError(f"plugin {spec.plugin!r} declares the flag {option}, which "
                                  f"megaplug reads itself ({taken}): it never reaches a plugin")
        existing = self.by_dest.get(spec.dest)
        if existing and existing[0].plugin != spec.plugin:
            raise PluginError(f"plugins {existing[0].plugin!r} and {spec.plugin!r} both "
                              f"declare the setting {spec.dest!r}")
        for option in spec.option_strings:
            owner = self.by_option.get(option)
            if owner is not None:
                raise PluginError(f"plugins {owner.plugin!r} and {spec.plugin!r} both declare "
                                  f"the flag {option}" if owner.plugin != spec.plugin else
                                  f"plugin {spec.plugin!r} declares twice the flag {option}")
        reader = self.by_env.get(spec.env) if spec.env else None
        if reader is not None and reader.dest != spec.dest:
            raise PluginError(f"plugins {reader.plugin!r} and {spec.plugin!r} both read the "
                              f"environment variable {spec.env} (into {reader.dest!r} and "
                              f"{spec.dest!r})")
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
        spec = self._first(dest)
        return spec.plugin if spec else None

    def spelling(self, name: str) -> str:
        """The user-facing spelling for a dest or option string."""
        if name.startswith("-"):
            return name
        spelled = (s.option_strings[0] for s in self.by_dest.get(name, ()) if s.option_strings)
        return next(spelled, name)

    def lookup(self, name: str) -> FlagSpec | None:
        """A spec by option string, dest, or either spelled without (or with) dashes."""
        bare = name.lstrip("-")
        return (self.by_option.get(name) or self._first(name)
                or self.by_option.get("--" + bare) or self._first(bare.replace("-", "_")))

    def _first(self, dest: str) -> FlagSpec | None:
        specs = self.by_dest.get(dest)
        return specs[0] if specs else None

    def suggest(self, name: str, candidates: Sequence[str] | None = None) -> str | None:
        """The closest known spelling, for a 'did you mean' hint."""
        import difflib  # only a mistyped flag pays for it

        pool = candidates if candidates is not None else list(self.by_option)
        return next(iter(difflib.get_close_matches(name, pool, n=1, cutoff=0.75)), None)

    def options_class(self, plugin: str) -> type:
        """The plugin's options class (``KeyError`` if it declared none)."""
        found = self.options_classes[plugin]
        if isinstance(found, str):
            found = self.options_classes[plugin] = resolve_reference(found)
        return found

    def plugin_specs(self, plugin: str) -> list[FlagSpec]:
        return [s for s in self.specs if s.plugin == plugin]


def resolve_reference(reference: str) -> Any:
    """The object ``module:qualname`` names (how a stored flag table and a named rule group
    refer to code: by where it lives, never as code to run)."""
    module_name, _, qualname = reference.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target
