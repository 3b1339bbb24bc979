"""The ``megaplug`` entry points, read without importing ``importlib.metadata``.

Scanning installed distributions through ``importlib.metadata`` costs tens of milliseconds
for its import alone -- more than the rest of a resolve. The metadata directories are read
directly where that is all there is, and the answer is kept across processes
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

from .._record import FrozenRecord
from ._store import _DISTRIBUTION_SUFFIXES, cached, forget_fingerprint, installed_fingerprint

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


_UNREADABLE = "!"


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
    """Read the entry points from installed distribution metadata (slow path): straight
    from the metadata directories where that is all there is, else (and whatever is odd)
    through ``importlib.metadata``, whose import alone costs tens of milliseconds."""
    found = read_entry_points()
    if found is None:
        found = _importlib_entry_points()
    return sorted(found, key=lambda ep: ep.name)


def _importlib_entry_points() -> list[EntryPointInfo]:
    """The entry points as importlib.metadata reads them; where it fails on some
    distribution's metadata, one broken entry saying so (not a traceback)."""
    from importlib import metadata

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


class _Unusual(Exception):
    """Something importlib.metadata must judge."""


def read_entry_points(group: str = GROUP) -> list[EntryPointInfo] | None:
    """``group``'s entry points as ``importlib.metadata.entry_points`` finds them -- every
    ``sys.path`` directory's ``*.dist-info`` / ``*.egg-info`` directories, the first
    distribution of a (normalized) name winning -- read without importing it; ``None``
    wherever it could see something else: a zip archive or egg on ``sys.path``, another
    finder of distributions, two distributions of one name in a directory, a metadata
    file this simple reader does not parse as importlib.metadata would."""
    from importlib.machinery import PathFinder

    if any(hasattr(finder, "find_distributions") and finder is not PathFinder
           for finder in sys.meta_path):
        return None
    seen: set[str] = set()
    found: list[EntryPointInfo] = []
    try:
        for entry in sys.path:
            if not isinstance(entry, str):
                continue
            root = entry or "."
            if os.path.isfile(root) or root.lower().endswith(".egg"):
                return None  # a zip archive or an egg: importlib.metadata looks inside
            try:
                children = os.listdir(root)
            except (OSError, ValueError):
                continue
            found += _directory_entry_points(root, children, seen, group)
    except _Unusual:
        return None
    return found


def _directory_entry_points(root: str, children: list[str], seen: set[str],
                            group: str) -> list[EntryPointInfo]:
    """The entry points of the distributions in one ``sys.path`` directory whose names
    are not in ``seen`` (then added); :class:`_Unusual` where importlib.metadata could
    read the directory otherwise."""
    import re

    found: list[EntryPointInfo] = []
    here: set[str] = set()
    for child in children:
        stem, dot, suffix = child.rpartition(".")
        if not dot or f".{suffix.lower()}" not in _DISTRIBUTION_SUFFIXES:
            continue
        if f".{suffix}" not in _DISTRIBUTION_SUFFIXES:
            raise _Unusual  # ".DIST-INFO": found, but named otherwise
        name = re.sub(r"[-_.]+", "-", stem.partition("-")[0]).lower().replace("-", "_")
        if name in here:
            raise _Unusual  # which one comes first is the directory's listing order
        here.add(name)
        if name not in seen:
            seen.add(name)
            found += _distribution_entry_points(os.path.join(root, child), group)
    return found


def _distribution_entry_points(path: str, group: str) -> list[EntryPointInfo]:
    if not os.path.isdir(path):
        raise _Unusual(path)  # an egg-info file is its own metadata
    source = os.path.join(path, "entry_points.txt")
    try:
        pairs = _section(source, group)
    except _Unreadable as error:
        return [_unreadable_entry(path, str(error))]
    if not pairs:
        return []
    try:
        about = _read_text(os.path.join(path, "METADATA"))
        if about is None:
            about = _read_text(os.path.join(path, "PKG-INFO")) or ""
    except _Unreadable as error:
        return [_unreadable_entry(path, str(error))]
    headers: dict[str, str] = {}
    for line in about.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t") or ":" not in line:
            raise _Unusual(path)  # a folded header: the email parser's to read
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), value.strip())
    return [EntryPointInfo(name, value, headers.get("name"), headers.get("version"), source)
            for name, value in pairs]


def _section(source: str, group: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of ``group`` in the ``entry_points.txt`` at ``source``
    (none if it is absent); :class:`_Unusual` where importlib.metadata refuses the file,
    :class:`_Unreadable` where it cannot be read at all or ``group`` is not text."""
    text = _read_text(source)
    if text is None:
        return []
    pairs, section = [], None
    for line in map(str.strip, text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, equals, value = line.partition("=")
            if not equals:
                raise _Unusual(source)  # importlib.metadata refuses the file
            if not (name + value).isprintable() or _undecoded(name + value):
                raise _Unreadable(f"its [{group}] section is not UTF-8 text")
            pairs.append((name.strip(), value.strip()))
    return pairs


class _Unreadable(Exception):
    """A metadata file that cannot be read (a FIFO, a device, too big), or whose
    ``megaplug`` section is not text."""


#: An entry_points.txt larger than this is not a distribution's (megaplug's own is ~1 kB).
_MAX_METADATA_BYTES = 1 << 20


def _undecoded(text: str) -> bool:
    return any("\udc80" <= character <= "\udcff" for character in text)


def _unreadable_entry(path: str, reason: str) -> EntryPointInfo:
    """A broken entry named after the distribution at ``path`` (``-p no:NAME`` blocks it)."""
    import re

    name = re.sub(r"[-_.]+", "-", os.path.basename(path).partition("-")[0]).lower()
    return EntryPointInfo(name, f"{_UNREADABLE}entry_points.txt cannot be read: {reason}",
                          name, None, os.path.join(path, "entry_points.txt"))


def _read_text(path: str) -> str | None:
    """A metadata file's text (bytes that are not UTF-8 kept as surrogate escapes: a
    section megaplug does not read may be in any encoding); ``None`` if it is absent, a
    directory or not readable by this user (importlib.metadata finds nothing there either).
    Never blocks: a FIFO, a device or a huge file is :class:`_Unreadable`. Plain ``os``
    calls: every cached entry point's file is read again in each process."""
    import stat

    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                             | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
        return None
    except (OSError, ValueError) as error:
        raise _Unreadable(f"{path}: {error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            return None
        if not stat.S_ISREG(mode):
            raise _Unreadable(f"{path} is not a regular file")
        chunks: list[bytes] = []
        while chunk := os.read(descriptor, _MAX_METADATA_BYTES + 1):
            chunks.append(chunk)
            if sum(map(len, chunks)) > _MAX_METADATA_BYTES:
                raise _Unreadable(f"{path} holds more than {_MAX_METADATA_BYTES} bytes")
    except OSError as error:
        raise _Unreadable(f"{path}: {error}") from None
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8-sig", "surrogateescape")


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
                or not directory.endswith(_DISTRIBUTION_SUFFIXES)
                or os.path.abspath(os.path.dirname(directory)) not in on_path):
            return False
        try:
            found = set(_section(source, GROUP))
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
