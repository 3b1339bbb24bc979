"""The on-disk caches of megaplug's slow answers, and their keys.

An answer (the entry points, the flag table, ``megaplug list``, a host's GPUs) is kept in a
small JSON file per kind and environment, keyed on what decides it: the installed
distributions' metadata (:func:`installed_fingerprint`), and for answers derived from the
plugins' code, the import closure -- every module file loaded while it was computed
(:func:`code_fingerprint`, :func:`cached` with ``track_imports``).

A cache file is trusted only as far as it is checked: a file that is not JSON, holds
another fingerprint, or holds a value of the wrong shape is recomputed and rewritten.

``MEGAPLUG_CACHE_DIR`` moves the caches (:func:`cache_directory`); ``MEGAPLUG_NO_CACHE=1``
turns them off.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import zlib

from .._startup import DISTRIBUTION_SUFFIXES as _DISTRIBUTION_SUFFIXES
from ..sources._switches import SwitchError, switch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable



_CACHE_VERSION = 2


def _file_state(path: str) -> str | None:
    """What changes whenever a file is rewritten, even in place or with its modification
    time put back: modification and change times and size; ``None`` if it is absent."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    return f"{status.st_mtime_ns}/{status.st_ctime_ns}/{status.st_size}"


def digest(parts: list[str]) -> str:
    """A short, stable digest of ``parts`` (a cache key)."""
    return f"{zlib.crc32(chr(10).join(parts).encode()):08x}"


def installed_fingerprint() -> str:
    """Stable while the installed distributions' metadata is: the Python version and, for
    each ``sys.path`` entry holding distributions, in order, its ``*.dist-info`` /
    ``*.egg-info`` entries, each with the stat of its ``entry_points.txt`` and, where it has
    one, of its ``METADATA`` (``PKG-INFO``); a zip or other file on ``sys.path`` by its own
    stat. A directory without distributions adds nothing, so the script's directory (or
    the working directory under ``python -m``) does not split the cache between ways of
    starting Python.

    Computed once per process for a given ``sys.path`` (every cached answer's key starts
    with it, and the entry points are read once per process too); :func:`forget` drops it.
    """
    global _FINGERPRINT
    key = tuple(entry for entry in sys.path if isinstance(entry, str))
    if _FINGERPRINT is None or _FINGERPRINT[0] != key:
        _FINGERPRINT = (key, _installed_fingerprint())
    return _FINGERPRINT[1]


_FINGERPRINT: tuple[tuple[str, ...], str] | None = None


def _installed_fingerprint() -> str:
    parts = [sys.version, str(_CACHE_VERSION)]
    for entry in sys.path:
        if not isinstance(entry, str):
            continue  # importlib.metadata skips them too
        try:
            names = sorted(name for name in os.listdir(entry or ".")
                           if name.endswith(_DISTRIBUTION_SUFFIXES))
        except (OSError, ValueError):  # absent, or a file (a zip archive)
            state = _file_state(entry)
            if state is not None:
                parts.append(f"{entry}:{state}")
            continue
        if names:
            parts.append(entry)
        for name in names:
            metadata = os.path.join(entry, name)
            entry_points_state = _file_state(os.path.join(metadata, "entry_points.txt"))
            if entry_points_state is None:
                parts.append(name)  # no entry points, whatever its other files say
                continue
            about = (_file_state(os.path.join(metadata, "METADATA"))
                     or _file_state(os.path.join(metadata, "PKG-INFO")))
            parts.append(f"{name}:{entry_points_state}:{about}")
    return digest(parts)


def _cache_path() -> str | None:
    """One cache file per Python environment (several virtualenvs share ``~/.cache``);
    ``None`` (no cache) when ``MEGAPLUG_NO_CACHE`` says so -- or holds neither yes nor no,
    which the plugin selection reports -- or no directory is meant for it."""
    try:
        if switch("MEGAPLUG_NO_CACHE", False):
            return None
    except SwitchError:
        return None
    base = cache_directory()
    if base is None:
        return None
    environment = zlib.crc32(sys.prefix.encode())
    return os.path.join(base, f"entry-points-{environment:08x}.json")


def cache_directory(environ: Any = None) -> str | None:
    """Where the caches live: ``MEGAPLUG_CACHE_DIR`` as given (but never ``/``), else
    ``megaplug`` under ``XDG_CACHE_HOME`` (when absolute, as the XDG specification says)
    or under the home directory's ``.cache``; ``None`` (no cache) when there is no home to
    put it in (``HOME`` empty, relative or the filesystem root: never the root's or the
    working directory's ``.cache`` by accident)."""
    env = os.environ if environ is None else environ
    chosen = env.get("MEGAPLUG_CACHE_DIR", "")
    if chosen:
        return chosen if _is_below_root(chosen) else None
    xdg = env.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg) and _is_below_root(xdg):
        return os.path.join(xdg, "megaplug")
    home = env.get("HOME")
    if home is None:  # no variable: the account's own (what expanduser("~") reads)
        home = os.path.expanduser("~")
    if os.path.isabs(home) and _is_below_root(home):
        return os.path.join(home, ".cache", "megaplug")
    return None


def _is_below_root(path: str) -> bool:
    return os.path.dirname(os.path.normpath(path)) != os.path.normpath(path)


def forget_fingerprint() -> None:
    """Drop the per-process fingerprint (tests that install or fake distributions)."""
    global _FINGERPRINT
    _FINGERPRINT = None


def code_fingerprint(extra: list[str]) -> str:
    """The part of a code-derived answer's key known before computing it: ``extra``, the
    installed distributions, every ``sys.path`` entry, and the modification time of each
    one but the script's directory and the working directory (a module appearing where an
    import once failed; those two change all the time). :func:`cached` with
    ``track_imports`` adds the rest: the files of the modules the computation imported.

    With every entry in the key, ``megaplug``, ``python -m megaplug`` from one directory
    or another, and a training script each have their own answer (kept side by side, see
    ``per_key``): a module found through the working directory is found again there."""
    try:
        working = os.getcwd()
    except OSError:  # deleted under us
        working = ""
    churning = {"", working, sys.path[0] if sys.path else ""}
    parts = [installed_fingerprint(), working, *extra]
    for entry in sys.path:
        if isinstance(entry, str):
            parts.append(entry if entry in churning else f"{entry}:{_file_state(entry)}")
    return digest(parts)


def _module_files(select: Callable[[str], bool]) -> dict[str, str | None]:
    """The file and package directories of every loaded module ``select`` takes by name,
    outside the standard library (the Python version already keys it), with their states."""
    standard = os.path.dirname(os.__file__) + os.sep
    paths = set()
    for name, module in list(sys.modules.items()):
        if not select(name):
            continue
        # the namespace itself: a module's __getattr__ (or a plugin's odd object) is not run
        try:
            namespace = module.__dict__
        except Exception:  # noqa: BLE001  (anything can sit in sys.modules)
            continue
        if not isinstance(namespace, dict):
            continue
        path = namespace.get("__file__")
        if isinstance(path, str):
            paths.add(path)
        # a package's directories: a file added to one may be imported next time
        package_paths = namespace.get("__path__")
        if isinstance(package_paths, (list, tuple)) or (
                type(package_paths).__name__ == "_NamespacePath"):
            paths.update(p for p in list(package_paths) if isinstance(p, str))
    return {path: _file_state(path) for path in sorted(paths)
            if not path.startswith(standard) or "-packages" in path}


#: The files read so far by each computation under way (innermost last): those of every
#: cached answer it used -- an answer computed from a flag table read back from its cache
#: depends on the options modules that table was declared from, which this process never
#: imported -- and files it read without importing them (``depends_on``).
_READS: list[dict[str, str | None]] = []


class reads:  # noqa: N801 -- used as a function: ``with reads() as read:``
    """Collect, within the block, the files of every cached answer used and every file
    passed to :func:`depends_on` (path -> state when read).

    A class rather than a ``contextlib`` generator: that module is not imported on the
    resolve path (docs/performance.md has the figures).
    """

    def __enter__(self) -> dict[str, str | None]:
        frame: dict[str, str | None] = {}
        _READS.append(frame)
        return frame

    def __exit__(self, *exc_info: object) -> None:
        _READS.pop()  # blocks nest: the innermost is last


def depends_on(files: Any) -> None:
    """Key the answers being computed on these files too: paths (a computation's reads
    without importing, such as the sources ``megaplug docs`` parses), or a mapping of paths
    to the states they were read in (what an object built from a cached answer came from)."""
    states = dict(files) if isinstance(files, dict) else {
        str(path): _file_state(str(path)) for path in files}
    for frame in _READS:
        for path, state in states.items():
            frame.setdefault(path, state)


def depends_on_packages(names: Any) -> None:
    """Key the answers being computed on every loaded module of these top-level packages
    (a plugin's package, imported before the computation began)."""
    wanted = set(names)
    depends_on(_module_files(lambda name: name.partition(".")[0] in wanted))


def conforms(value: Any, shape: Any) -> bool:
    """Whether JSON ``value`` has ``shape``: a type, ``None``, a tuple of alternatives,
    ``[item shape]`` for a list, or ``{key: shape}`` for an object with at least those keys."""
    if isinstance(shape, tuple):
        return any(conforms(value, option) for option in shape)
    if shape is None:
        return value is None
    if isinstance(shape, list):
        return isinstance(value, list) and all(conforms(item, shape[0]) for item in value)
    if isinstance(shape, dict):
        return isinstance(value, dict) and all(
            key in value and conforms(value[key], item) for key, item in shape.items())
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, shape)


def _still_valid(stored: Any, fingerprint: str, shape: Any, track_imports: bool) -> bool:
    if not isinstance(stored, dict) or stored.get("fingerprint") != fingerprint:
        return False
    if shape is not None and not conforms(stored.get("value"), shape):
        return False
    if not track_imports:
        return True
    imports = stored.get("imports")
    return (isinstance(imports, dict) and bool(imports)
            and all(_file_state(path) == state for path, state in imports.items()))


#: A cache file larger than this is not ours (the list of ~20 plugins is ~20 kB).
_MAX_CACHE_BYTES = 8 << 20


def _read_json(path: str) -> Any:
    """The JSON in a regular file of sane size at ``path``, else ``None`` (never blocks on
    a FIFO or device put in the file's place)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size > _MAX_CACHE_BYTES:
            return None
        with open(descriptor, "rb", closefd=False) as handle:
            data = handle.read(_MAX_CACHE_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(descriptor)
    try:
        return json.loads(data)
    except (ValueError, RecursionError):
        return None


#: Answers kept side by side per kind with ``per_key`` (the most recently written).
_KEPT_PER_KIND = 8


def cached(kind: str, fingerprint: str | None, compute: Callable[[], Any], *,
           shape: Any = None, track_imports: bool = False,
           accept: Callable[[Any], bool] | None = None, per_key: bool = False) -> Any:
    """``compute()``'s JSON-able result, reused across processes while ``fingerprint``
    holds, the stored value has ``shape`` and ``accept`` (if given) takes it; with
    ``track_imports``, also while every module file loaded when it was computed is
    unchanged. With ``per_key``, each fingerprint has its own file (the last few are
    kept), so processes with different keys do not overwrite one another's answer."""
    path = _cache_path()
    if path is None or fingerprint is None:
        return compute()
    path = path.replace("entry-points-", f"{kind}-")
    if per_key:
        path = path.replace(".json", f"-{fingerprint}.json")
    stored = _read_json(path)
    if _still_valid(stored, fingerprint, shape, track_imports) and (
            accept is None or accept(stored["value"])):
        if track_imports:
            depends_on(stored["imports"])
        return stored["value"]
    started = time.time_ns()
    before = set(sys.modules) if track_imports else set()
    with reads() as read:
        value = compute()
    record: dict[str, Any] = {"fingerprint": fingerprint, "value": value}
    if track_imports:
        # what the computation imported, megaplug's own code and what it named (plugins'
        # packages); not what the process had imported for its own ends: a training
        # script's torch and Megatron are ~3,500 files every later process would check
        record["imports"] = {**read, **_module_files(
            lambda name: name not in before or name.partition(".")[0] == "megaplug")}
        if any(state is not None and int(state.split("/")[0]) >= started
               for state in record["imports"].values()):
            return value  # a file changed while it was read: its state may not be the code's
    if _store(path, record) and per_key:
        try:
            _prune(os.path.dirname(path), os.path.basename(path)[:-len(f"-{fingerprint}.json")])
        except OSError:
            pass
    return value


def _store(path: str, record: dict[str, Any]) -> bool:
    """Write ``record`` to ``path`` atomically; ``False`` where it cannot be (an unwritable
    directory, a value JSON cannot carry), leaving no temporary file behind."""
    # unique across the nodes sharing a home directory, whose process ids may collide
    temporary = f"{path}.{os.getpid()}.{os.urandom(4).hex()}{_TEMPORARY_SUFFIX}"
    replaced = False
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        # dumps, not dump: json.dump writes through the pure-Python encoder, many times
        # slower than the C one dumps uses (docs/performance.md)
        text = json.dumps(record, allow_nan=False)
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, path)
        replaced = True
    except (OSError, TypeError, ValueError):
        return False
    finally:  # also when interrupted (Ctrl-C) between the write and the rename
        if not replaced:
            try:
                os.remove(temporary)
            except OSError:
                pass
    _remove_stale_temporaries(os.path.dirname(path))
    return True


_TEMPORARY_SUFFIX = ".tmp"
#: A temporary file older than this was left by a process that died before renaming it
#: (a write and its rename take milliseconds, even on a network file system).
_STALE_TEMPORARY_SECONDS = 600


def _remove_stale_temporaries(directory: str) -> None:
    """Remove the temporary files that processes killed mid-write left in ``directory``."""
    try:
        names = [name for name in os.listdir(directory) if name.endswith(_TEMPORARY_SUFFIX)]
    except OSError:
        return
    oldest = time.time() - _STALE_TEMPORARY_SECONDS
    for name in names:
        stale = os.path.join(directory, name)
        try:
            if os.lstat(stale).st_mtime < oldest:
                os.remove(stale)
        except OSError:
            pass


def _prune(directory: str, prefix: str) -> None:
    """Keep the ``_KEPT_PER_KIND`` most recently written answers of one kind."""
    paths = [os.path.join(directory, name) for name in os.listdir(directory)
             if name.startswith(prefix + "-") and name.endswith(".json")]
    def written(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return 0

    for stale in sorted(paths, key=written, reverse=True)[_KEPT_PER_KIND:]:
        try:
            os.remove(stale)
        except OSError:
            pass
