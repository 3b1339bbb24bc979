"""The ``megaplug`` entry points, read without importing ``importlib.metadata``.

Scanning installed distributions through ``importlib.metadata`` costs tens of milliseconds
for its import alone -- more than the rest of a resolve. The metadata directories are read
directly where that is all there is, and the answer is kept across processes
(:mod:`megaplug.cache._store`), keyed on the stat of every distribution's
``entry_points.txt`` and ``METADATA`` (an in-place edit changes the file's stat, not its
directory's).
"""

from __future__ import annotations

import importlib
import os
import sys

from .._record import FrozenRecord
from ._store import _DISTRIBUTION_SUFFIXES, cached, forget_fingerprint, installed_fingerprint

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GROUP = "megaplug"


class EntryPointInfo(FrozenRecord):
    """An entry point of the ``megaplug`` group, loadable without importlib.metadata."""

    __slots__ = ("name", "value", "distribution", "version")
    name: str
    value: str
    distribution: str | None
    version: str | None

    def __init__(self, name: str, value: str, distribution: str | None,
                 version: str | None) -> None:
        self._fill(locals())

    def to_dict(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in self.__slots__}

    def load(self) -> Any:
        module_name, _, attribute = self.value.partition(":")
        target: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            target = getattr(target, part)
        return target



def scan() -> list[EntryPointInfo]:
    """Read the entry points from installed distribution metadata (slow path): straight
    from the metadata directories where that is all there is, else (and whatever is odd)
    through ``importlib.metadata``, whose import alone costs tens of milliseconds."""
    found = read_entry_points()
    if found is None:
        from importlib import metadata

        found = [EntryPointInfo(ep.name, ep.value,
                                *((ep.dist.metadata["Name"], ep.dist.version)
                                  if getattr(ep, "dist", None) else (None, None)))
                 for ep in metadata.entry_points(group=GROUP)]
    return sorted(found, key=lambda ep: ep.name)


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
    text = _read_text(os.path.join(path, "entry_points.txt"))
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
                raise _Unusual(path)  # importlib.metadata refuses the file
            pairs.append((name.strip(), value.strip()))
    if not pairs:
        return []
    about = _read_text(os.path.join(path, "METADATA"))
    if about is None:
        about = _read_text(os.path.join(path, "PKG-INFO")) or ""
    headers: dict[str, str] = {}
    for line in about.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t") or ":" not in line:
            raise _Unusual(path)  # a folded header: the email parser's to read
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), value.strip())
    return [EntryPointInfo(name, value, headers.get("name"), headers.get("version"))
            for name, value in pairs]


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
        return None
    except (OSError, UnicodeDecodeError):
        raise _Unusual(path) from None


_MEMO: list[EntryPointInfo] | None = None


#: The shape a cached row must have (a tampered or foreign cache file is recomputed).
_ENTRY_POINT_SHAPE = [{"name": str, "value": str, "distribution": (str, None),
                       "version": (str, None)}]


def entry_points() -> list[EntryPointInfo]:
    """The ``megaplug`` entry points, sorted by name: once per process, cached across processes."""
    global _MEMO
    if _MEMO is not None:
        return _MEMO
    rows = cached("entry-points", installed_fingerprint(),
                  lambda: [ep.to_dict() for ep in scan()], shape=_ENTRY_POINT_SHAPE)
    _MEMO = [EntryPointInfo(row["name"], row["value"], row["distribution"], row["version"])
             for row in rows]
    return _MEMO


def forget() -> None:
    """Drop the in-process memos (tests that install or fake distributions)."""
    global _MEMO
    _MEMO = None
    forget_fingerprint()
