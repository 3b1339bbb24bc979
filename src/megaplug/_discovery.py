"""Entry-point discovery with an on-disk cache.

Scanning installed distributions needs ``importlib.metadata``, whose import alone costs
tens of milliseconds — more than the rest of a resolve. The result is cached in a small
JSON file keyed by a fingerprint of ``sys.path`` (each directory and its modification
time, which changes whenever a distribution is installed or removed there), so a process
pays for the scan only after the installed set changed.

``MEGAPLUG_CACHE_DIR`` moves the cache; ``MEGAPLUG_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import zlib
from typing import Any, Callable

from ._record import FrozenRecord

GROUP = "megaplug"
_CACHE_VERSION = 1


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


def _fingerprint(everything: bool = False) -> str:
    """Stable while the installed distributions are: the directories on ``sys.path`` that
    hold them, with their modification times. The script directory and the working
    directory are left out unless ``everything``: they change all the time and hold no
    installed metadata (but may hold an importable module)."""
    skip = set() if everything else {"", os.getcwd(), sys.path[0] if sys.path else ""}
    parts = [sys.version, str(_CACHE_VERSION)]
    parts += [f"{entry}:{_mtime(entry)}" for entry in sys.path
              if entry not in skip and _mtime(entry) is not None]
    return _crc(parts)


def _mtime(path: str) -> int | None:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return None


def _crc(parts: list[str]) -> str:
    return f"{zlib.crc32(chr(10).join(parts).encode()):08x}"


def _cache_path() -> str | None:
    """One cache file per Python environment (several virtualenvs share ``~/.cache``)."""
    if os.environ.get("MEGAPLUG_NO_CACHE", "").strip() not in ("", "0"):
        return None
    base = os.environ.get("MEGAPLUG_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "megaplug")
    environment = zlib.crc32(sys.prefix.encode())
    return os.path.join(base, f"entry-points-{environment:08x}.json")


def scan() -> list[EntryPointInfo]:
    """Read the entry points from installed distribution metadata (slow path)."""
    from importlib import metadata

    found = [EntryPointInfo(ep.name, ep.value, *((ep.dist.metadata["Name"], ep.dist.version)
                                                 if getattr(ep, "dist", None) else (None, None)))
             for ep in metadata.entry_points(group=GROUP)]
    return sorted(found, key=lambda ep: ep.name)


_MEMO: list[EntryPointInfo] | None = None


def entry_points() -> list[EntryPointInfo]:
    """The ``megaplug`` entry points, sorted by name: once per process, cached across processes."""
    global _MEMO
    if _MEMO is not None:
        return _MEMO
    rows = cached("entry-points", _fingerprint(), lambda: [ep.to_dict() for ep in scan()])
    _MEMO = [EntryPointInfo(**row) for row in rows]
    return _MEMO


def forget() -> None:
    """Drop the in-process memo (tests that install or fake distributions)."""
    global _MEMO
    _MEMO = None


# -- a cache for facts derived from the plugins' code (``megaplug list``) -----------------


def _source_parts(module_name: str) -> list[str] | None:
    """Modification times of a plugin module's source files, found without importing it."""
    from importlib import util

    try:
        spec = util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    if not spec.submodule_search_locations:
        return [f"{spec.origin}:{_mtime(spec.origin)}"]
    parts = []
    for root in spec.submodule_search_locations:
        for directory, subdirectories, files in os.walk(root):
            subdirectories[:] = sorted(set(subdirectories) - {"__pycache__", "tests"})
            paths = (os.path.join(directory, name) for name in sorted(files)
                     if name.endswith(".py"))
            parts += [f"{path}:{_mtime(path)}" for path in paths]
    return parts


def code_fingerprint(module_names: list[str], extra: list[str]) -> str | None:
    """Stable while the installed distributions and these modules' sources are, or ``None``
    when a module cannot be located (then nothing is cached)."""
    parts = [_fingerprint(everything=True), *extra]
    for name in module_names:
        found = _source_parts(name)
        if found is None:
            return None
        parts += found
    return _crc(parts)


def cached(kind: str, fingerprint: str | None, compute: Callable[[], Any]) -> Any:
    """``compute()``'s JSON-able result, reused across processes while ``fingerprint`` holds."""
    path = _cache_path()
    if path is None or fingerprint is None:
        return compute()
    path = path.replace("entry-points-", f"{kind}-")
    try:
        with open(path, encoding="utf-8") as handle:
            stored = json.load(handle)
        if stored["fingerprint"] == fingerprint:
            return stored["value"]
    except (OSError, ValueError, TypeError, KeyError):
        pass
    value = compute()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"fingerprint": fingerprint, "value": value}, handle)
        os.replace(temporary, path)
    except OSError:
        pass
    return value
