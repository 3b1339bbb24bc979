"""The ``megaplug`` entry points, read without importing ``importlib.metadata``.

Importing ``importlib.metadata`` costs more than the rest of a resolve, so the metadata
directories are read directly where that is all there is (:mod:`megaplug._startup`'s
reader), and the answer is kept across processes
(:mod:`megaplug.cache._store`), keyed on the stat of every distribution's
``entry_points.txt`` and ``METADATA`` (an in-place edit changes the file's stat, not its
directory's). A cached entry point is used only while the ``entry_points.txt`` it was read
from still says it: a hand-edited cache file names no module megaplug will import.

Whatever a distribution's metadata holds -- another encoding than UTF-8, a FIFO or a
device in the file's place, a line importlib.metadata refuses -- no command hangs or
crashes: an unreadable ``megaplug`` section is a broken plugin named after its
distribution (``-p no:NAME`` blocks it), and the rest is read. A plugin module's output
while it is imported goes to stderr, never into a command's answer on stdout.
"""

from __future__ import annotations

import importlib
import os
import sys
import _thread

from .. import _startup
from .._record import FrozenRecord
from .._startup import DISTRIBUTION_SUFFIXES, UNREADABLE as _UNREADABLE
from .._startup import Unreadable as _Unreadable, Unusual as _Unusual
from ._store import cached, forget_fingerprint, installed_fingerprint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GROUP = "megaplug"


class EntryPointInfo(FrozenRecord):
    """An entry point of the ``megaplug`` group, loadable without importlib.metadata.

    ``source`` is the ``entry_points.txt`` it was read from ("" where importlib.metadata
    read it from elsewhere). A ``value`` starting with ``!`` stands for a section that
    could not be read: loading it raises :class:`ImportError` with the reason."""

    __slots__ = ("name", "value", "distribution", "version", "source")
    name: str
    value: str
    distribution: str | None
    version: str | None
    source: str

    def __init__(self, name: str, value: str, distribution: str | None,
                 version: str | None, source: str = "") -> None:
        self._fill(locals())

    def to_dict(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in self.__slots__}

    def load(self) -> Any:
        if self.value.startswith(_UNREADABLE):
            raise ImportError(self.value[len(_UNREADABLE):])
        # ``module:attr [extra, ...]``: the extras name optional dependencies, not code
        module_name, _, attribute = self.value.partition("[")[0].partition(":")
        target: Any = import_quietly(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            target = getattr(target, part)
        return target



def note_shadowed(problems: list[tuple[str, str]], entry_point: EntryPointInfo,
                  loaded: Any) -> None:
    """Add to ``problems`` (once) that ``entry_point`` is not loaded: the plugin ``loaded``
    (a built-in, or another distribution's entry point) already has its name."""
    problem = (f"entry point {entry_point.name!r} of distribution "
               f"{entry_point.distribution or '?'} ({entry_point.name} = {entry_point.value}) "
               f"is not loaded: plugin {loaded.name!r} ({loaded.where()}) already has that "
               "name", f"rename the entry point, or uninstall {entry_point.distribution or 'it'}")
    if problem not in problems:
        problems.append(problem)

_DIVERTED = [0, None]  # imports under way in any thread, the stdout they put aside
_DIVERTING = _thread.allocate_lock()


def import_quietly(module_name: str) -> Any:
    """Import a plugin's module with what it prints going to stderr: a command's answer on
    stdout (resolve's JSON) stays the answer. Safe with imports in several threads."""
    with _DIVERTING:
        if _DIVERTED[0] == 0:
            _DIVERTED[1], sys.stdout = sys.stdout, sys.stderr
        _DIVERTED[0] += 1
    try:
        return importlib.import_module(module_name)
    finally:
        with _DIVERTING:
            _DIVERTED[0] -= 1
            if _DIVERTED[0] == 0:
                if sys.stdout is sys.stderr:  # not replaced meanwhile by the plugin
                    sys.stdout = _DIVERTED[1]
                _DIVERTED[1] = None



def scan() -> list[EntryPointInfo]:
    """Read the entry points from installed distribution metadata (what the cache keeps):
    straight from the metadata directories where that is all there is, else (and whatever
    is odd) through ``importlib.metadata``."""
    found = read_entry_points()
    if found is None:
        found = _importlib_entry_points()
    return sorted(found, key=lambda ep: ep.name)


def _importlib_entry_points() -> list[EntryPointInfo]:
    """The entry points as importlib.metadata reads them; where it fails on some
    distribution's metadata, one broken entry saying so (not a traceback)."""
    metadata = _startup.metadata()
    try:
        return [EntryPointInfo(ep.name, ep.value,
                               *((ep.dist.metadata["Name"], ep.dist.version)
                                 if getattr(ep, "dist", None) else (None, None)),
                               _metadata_source(ep))
                for ep in metadata.entry_points(group=GROUP)]
    except Exception as error:  # noqa: BLE001  (any distribution's metadata, any failure)
        return [EntryPointInfo("installed-metadata", _UNREADABLE + "importlib.metadata could "
                               f"not read the installed distributions' metadata: "
                               f"{type(error).__name__}: {error}", None, None)]


def _metadata_source(entry_point: Any) -> str:
    """The ``entry_points.txt`` importlib.metadata read ``entry_point`` from, if a file."""
    path = getattr(getattr(entry_point, "dist", None), "_path", None)
    file = os.path.join(path, "entry_points.txt") if isinstance(path, (str, os.PathLike)) else ""
    return os.fspath(file) if file and os.path.isfile(file) else ""


def read_entry_points(group: str = GROUP) -> list[EntryPointInfo] | None:
    """``group``'s entry points as ``importlib.metadata.entry_points`` finds them, read from
    the metadata directories by :func:`megaplug._startup.read_entry_points`; ``None`` where
    something there is for importlib.metadata to judge."""
    rows = _startup.read_entry_points(group)
    return None if rows is None else [EntryPointInfo(*row) for row in rows]


def group_entry_points(group: str) -> list[Any]:
    """``group``'s entry points (each with ``name`` and ``load()``): read from the metadata
    directories, or, for an unusual installation, as ``importlib.metadata`` finds them.
    For the groups through which distributions extend a command (``megaplug.memory``,
    ``megaplug.export``, ``megaplug.config_formats``, ...)."""
    entries = read_entry_points(group)
    if entries is None:
        entries = list(_startup.metadata().entry_points(group=group))
    return entries


_MEMO: list[EntryPointInfo] | None = None


#: The shape a cached row must have (a tampered or foreign cache file is recomputed).
_ENTRY_POINT_SHAPE = [{"name": str, "value": str, "distribution": (str, None),
                       "version": (str, None), "source": str}]


def entry_points() -> list[EntryPointInfo]:
    """The ``megaplug`` entry points, sorted by name: once per process, cached across processes."""
    global _MEMO
    if _MEMO is not None:
        return _MEMO
    rows = cached("entry-points", installed_fingerprint(),
                  lambda: [ep.to_dict() for ep in scan()], shape=_ENTRY_POINT_SHAPE,
                  accept=_still_declared)
    _MEMO = [EntryPointInfo(row["name"], row["value"], row["distribution"], row["version"],
                            row["source"]) for row in rows]
    return _MEMO


def _still_declared(rows: list[dict[str, Any]]) -> bool:
    """Whether every cached entry point is still declared by the ``entry_points.txt`` it
    names, itself in a distribution's metadata directory on ``sys.path`` -- so a cache file
    edited by hand never makes megaplug import a module (as the flag table's references
    are followed only into the plugins' packages)."""
    by_source: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        by_source.setdefault(row["source"], set()).add((row["name"], row["value"]))
    on_path = {os.path.abspath(entry or ".") for entry in sys.path if isinstance(entry, str)}
    for source, declared in by_source.items():
        directory = os.path.dirname(source)
        if (os.path.basename(source) != "entry_points.txt"
                or not directory.endswith(DISTRIBUTION_SUFFIXES)
                or os.path.abspath(os.path.dirname(directory)) not in on_path):
            return False
        try:
            found = set(_startup.entry_point_section(source, GROUP))
        except (_Unusual, _Unreadable):
            found = set()
        # a broken entry (its section unreadable) imports nothing
        if not all(pair in found or pair[1].startswith(_UNREADABLE) for pair in declared):
            return False
    return True


def forget() -> None:
    """Drop the in-process memos (tests that install or fake distributions)."""
    global _MEMO
    _MEMO = None
    forget_fingerprint()
