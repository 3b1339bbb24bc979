"""Start-up work in one place: what keeps a process that resolves its arguments cheap.

Every rank of a training job resolves its arguments, thousands at once, so whatever
megaplug imports or computes before the answer is paid by every one of them. These are the
tricks, why each exists, and where it lives (the helpers below, or the module named);
what each saves, measured, is in docs/performance.md ("Start-up"). Plugin authors need
none of them: their one rule is "keep ``__init__.py`` free of imports".

1. **Names exported on first use** (:func:`lazy_exports`). ``megaplug`` and
   ``megaplug.megatron`` serve their public names through a module ``__getattr__``
   (PEP 562), importing the defining module when a name is first read and keeping the value
   in the package's namespace, so the next read is a plain lookup. ``import megaplug``
   imports the package alone; a resolve never imports the switch, Megatron's argument
   groups or the ``type=`` helpers.
2. **No ``typing`` at run time: ``TYPE_CHECKING = False``.** Each of megaplug's modules
   (and of the shipped plugins' rules) writes that line and imports what only annotations
   need under ``if TYPE_CHECKING:``; with ``from __future__ import annotations`` an
   annotation is a string nobody evaluates.
   Type checkers (mypy, pyright) treat a module constant of that name as
   ``typing.TYPE_CHECKING``. It is written in each module, not imported from here, so that
   a module reads on its own. The same goes for the other standard modules megaplug does
   without on a resolve (``copy``, ``weakref``, ``heapq``, ``contextlib``, ``inspect``,
   ``dataclasses``: a test names them), and for regular expressions, compiled when first
   used rather than at import. Options modules keep their ``typing`` imports: they are
   imported only by the process that declares the flag table.
3. **A package found without importing it** (:func:`find_spec`): a plugin's requirement
   and a package's version are looked up in every resolve; asking the finders on
   ``sys.meta_path`` as the import system does spares ``importlib.util`` (and the
   ``contextlib`` it brings).
4. **No ``importlib.metadata`` where the files answer.** Its import costs more than the
   rest of a resolve. A package's version is read from the ``NAME-VERSION.dist-info``
   directory beside it (:func:`version_beside`); the ``megaplug`` entry points are read
   from each distribution's ``entry_points.txt`` (:func:`read_entry_points`). Anything
   unusual -- a zip or an egg on ``sys.path``, another finder of distributions, a file
   this reader does not parse as importlib.metadata would -- goes to importlib.metadata
   itself, imported through :func:`metadata` where it is needed.
5. **Answers kept across processes** (:mod:`megaplug.cache`): the entry points, the
   declared flag table (a process that reads it back imports no options module), the
   answers of ``list`` / ``flags`` / ``docs``, each keyed on what decides it; the host's
   NVML device list (:mod:`megaplug.environment._devices`), keyed on the boot, the driver
   and the process's cgroups.
6. **Declarations by reference**: ``PluginInfo(options="pkg.options:Name")`` and rule
   groups named ``"pkg.rules:TABLE"`` are imported when a phase needs them (the kernel),
   and a group under a condition only in a resolve where it holds.
7. **Imports where they are used**: what only some commands or some configurations need
   -- ``difflib`` for a spelling suggestion, ``ctypes`` for NVML, ``graphlib`` for an
   ordering cycle, ``pluggy`` for a plugin that implements a hook, ``pathlib`` for a path
   read from a file, Megatron's groups and provider wrapper -- is imported inside the
   function that needs it.
8. **The program's exit** (:mod:`megaplug.cli`): the command runs without the cyclic
   garbage collector and ends with ``os._exit`` after flushing and the ``atexit``
   callbacks, not the interpreter's module-by-module teardown.
9. **No code generated per class**: the kernel's records are ``__slots__`` classes
   (:mod:`megaplug._record`), not ``@dataclass``es, and ``@megaplug.options`` classes share
   one ``__init__`` / ``__repr__`` / ``__eq__`` (:mod:`megaplug.values._options_class`),
   becoming real dataclasses only when ``dataclasses`` first looks at them.

This module imports nothing beyond what a bare interpreter has loaded (``os``, ``sys``)
and ``importlib``, and nothing of megaplug: ``import megaplug`` imports it.
"""

from __future__ import annotations

import importlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

    #: One entry point: (name, value, distribution, version, the entry_points.txt read).
    EntryPointRow = tuple[str, str, "str | None", "str | None", str]


def lazy_exports(package: str, exports: Mapping[str, str], namespace: dict[str, Any],
                 fallback: Callable[[str], Any] | None = None,
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` serving ``exports`` (public name ->
    the module defining it, relative to ``package``) on first use.

    A name is imported when first read and kept in ``namespace`` (the package's
    ``globals()``), so the module ``__getattr__`` is not asked for it again. ``fallback``,
    if given, is asked for any other name and raises :class:`AttributeError` itself."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            if fallback is not None:
                return fallback(name)
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exports})

    return __getattr__, __dir__


def find_spec(name: str) -> Any:
    """``importlib.util.find_spec(name)``, without importing ``importlib.util``: for a
    top-level name not yet imported, the finders on ``sys.meta_path`` are asked in turn,
    as the import system asks them (an editable install's finder included)."""
    if "." in name or name in sys.modules:
        from importlib import util

        return util.find_spec(name)
    for finder in sys.meta_path:
        finder_find_spec = getattr(finder, "find_spec", None)
        spec = finder_find_spec(name, None) if finder_find_spec is not None else None
        if spec is not None:
            return spec
    return None


def metadata() -> Any:
    """``importlib.metadata``: imported here, for what the readers below leave to it."""
    from importlib import metadata as module

    return module


def normalized_name(name: str) -> str:
    """A distribution's name as PEP 503 compares it, with ``_`` (``Fancy.Pkg`` -> ``fancy_pkg``)."""
    import re

    return re.sub(r"[-_.]+", "_", name).lower()


def version_beside(spec: Any, distributions: tuple[str, ...]) -> str | None:
    """The version in a ``NAME-VERSION.dist-info`` directory beside the package ``spec``
    found, for one of ``distributions``; ``None`` if there is none (ask importlib.metadata).
    That is where pip puts it, and a directory listing costs no import."""
    origin = getattr(spec, "origin", None)
    if not origin or origin in ("built-in", "frozen"):
        return None
    package_dir = os.path.dirname(origin)
    site = os.path.dirname(package_dir) if origin.endswith("__init__.py") else package_dir
    return version_in(site, distributions)


def version_in(site: str, distributions: tuple[str, ...]) -> str | None:
    """The version of the first ``NAME-VERSION.dist-info`` directory in ``site`` whose name
    is one of ``distributions`` (compared normalized); ``None`` if there is none."""
    wanted = {normalized_name(name) for name in distributions}
    try:
        entries = os.listdir(site)
    except OSError:
        return None
    for entry in entries:
        if entry.endswith(".dist-info"):
            name, _, version = entry[: -len(".dist-info")].partition("-")
            if version and normalized_name(name) in wanted:
                return version
    return None


# -- entry points, read from the metadata directories --------------------------------------

#: The metadata directories of installed distributions.
DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info")
#: The value of an entry point that stands for a section that could not be read: the
#: reason follows it, and loading it raises ImportError with the reason.
UNREADABLE = "!"
#: An entry_points.txt larger than this is not a distribution's (megaplug's own is ~1 kB).
_MAX_METADATA_BYTES = 1 << 20


class Unusual(Exception):
    """Something importlib.metadata must judge."""


class Unreadable(Exception):
    """A metadata file that cannot be read (a FIFO, a device, too big), or whose
    section is not text."""


def read_entry_points(group: str) -> list[EntryPointRow] | None:
    """``group``'s entry points as ``importlib.metadata.entry_points`` finds them -- every
    ``sys.path`` directory's ``*.dist-info`` / ``*.egg-info`` directories, the first
    distribution of a (normalized) name winning -- read without importing it, as
    (name, value, distribution, version, source) rows; ``None`` wherever it could see
    something else: a zip archive or egg on ``sys.path``, another finder of distributions,
    two distributions of one name in a directory, a metadata file this simple reader does
    not parse as importlib.metadata would."""
    from importlib.machinery import PathFinder

    if any(hasattr(finder, "find_distributions") and finder is not PathFinder
           for finder in sys.meta_path):
        return None
    seen: set[str] = set()
    found: list[EntryPointRow] = []
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
    except Unusual:
        return None
    return found


def _directory_entry_points(root: str, children: list[str], seen: set[str],
                            group: str) -> list[EntryPointRow]:
    """The entry points of the distributions in one ``sys.path`` directory whose names
    are not in ``seen`` (then added); :class:`Unusual` where importlib.metadata could
    read the directory otherwise."""
    import re

    found: list[EntryPointRow] = []
    here: set[str] = set()
    for child in children:
        stem, dot, suffix = child.rpartition(".")
        if not dot or f".{suffix.lower()}" not in DISTRIBUTION_SUFFIXES:
            continue
        if f".{suffix}" not in DISTRIBUTION_SUFFIXES:
            raise Unusual  # ".DIST-INFO": found, but named otherwise
        name = re.sub(r"[-_.]+", "-", stem.partition("-")[0]).lower().replace("-", "_")
        if name in here:
            raise Unusual  # which one comes first is the directory's listing order
        here.add(name)
        if name not in seen:
            seen.add(name)
            found += _distribution_entry_points(os.path.join(root, child), group)
    return found


def _distribution_entry_points(path: str, group: str,
                               ) -> list[EntryPointRow]:
    if not os.path.isdir(path):
        raise Unusual(path)  # an egg-info file is its own metadata
    source = os.path.join(path, "entry_points.txt")
    try:
        pairs = entry_point_section(source, group)
    except Unreadable as error:
        return [_unreadable_entry(path, str(error))]
    if not pairs:
        return []
    try:
        about = read_small_text(os.path.join(path, "METADATA"))
        if about is None:
            about = read_small_text(os.path.join(path, "PKG-INFO")) or ""
    except Unreadable as error:
        return [_unreadable_entry(path, str(error))]
    headers: dict[str, str] = {}
    for line in about.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t") or ":" not in line:
            raise Unusual(path)  # a folded header: the email parser's to read
        key, _, value = line.partition(":")
        headers.setdefault(key.strip().lower(), value.strip())
    return [(name, value, headers.get("name"), headers.get("version"), source)
            for name, value in pairs]


def entry_point_section(source: str, group: str) -> list[tuple[str, str]]:
    """The (name, value) pairs of ``group`` in the ``entry_points.txt`` at ``source``
    (none if it is absent); :class:`Unusual` where importlib.metadata refuses the file,
    :class:`Unreadable` where it cannot be read at all or ``group`` is not text."""
    text = read_small_text(source)
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
                raise Unusual(source)  # importlib.metadata refuses the file
            if not (name + value).isprintable() or _undecoded(name + value):
                raise Unreadable(f"its [{group}] section is not UTF-8 text")
            pairs.append((name.strip(), value.strip()))
    return pairs


def _undecoded(text: str) -> bool:
    return any("\udc80" <= character <= "\udcff" for character in text)


def _unreadable_entry(path: str, reason: str) -> EntryPointRow:
    """A broken entry named after the distribution at ``path`` (``-p no:NAME`` blocks it)."""
    import re

    name = re.sub(r"[-_.]+", "-", os.path.basename(path).partition("-")[0]).lower()
    return (name, f"{UNREADABLE}entry_points.txt cannot be read: {reason}", name, None,
            os.path.join(path, "entry_points.txt"))


def read_small_text(path: str) -> str | None:
    """A metadata file's text (bytes that are not UTF-8 kept as surrogate escapes: a
    section megaplug does not read may be in any encoding); ``None`` if it is absent, a
    directory or not readable by this user (importlib.metadata finds nothing there either).
    Never blocks: a FIFO, a device or a huge file is :class:`Unreadable`. Plain ``os``
    calls: every cached entry point's file is read again in each process."""
    import stat

    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                             | getattr(os, "O_NOCTTY", 0))
    except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
        return None
    except (OSError, ValueError) as error:
        raise Unreadable(f"{path}: {error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            return None
        if not stat.S_ISREG(mode):
            raise Unreadable(f"{path} is not a regular file")
        chunks: list[bytes] = []
        while chunk := os.read(descriptor, _MAX_METADATA_BYTES + 1):
            chunks.append(chunk)
            if sum(map(len, chunks)) > _MAX_METADATA_BYTES:
                raise Unreadable(f"{path} holds more than {_MAX_METADATA_BYTES} bytes")
    except OSError as error:
        raise Unreadable(f"{path}: {error}") from None
    finally:
        os.close(descriptor)
    return b"".join(chunks).decode("utf-8-sig", "surrogateescape")
