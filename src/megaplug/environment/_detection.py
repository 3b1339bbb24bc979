"""Which megatron-core this process would import, and its version, found without importing it.

``megatron`` is a namespace package in every megatron-core wheel and source checkout
(0.13's sdist, the 0.14 and 0.19.2 wheels, Megatron-LM's tree: no ``megatron/__init__.py``;
``megatron/core/__init__.py`` and a ``megatron_core-VERSION.dist-info`` beside ``megatron``).
So the search follows the import system's rule for a name that may be either: the first
``sys.path`` entry holding a regular ``megatron`` package (or module) wins outright; failing
that, ``megatron`` is the namespace of every ``megatron`` directory on the path, and
``megatron.core`` comes from the first of them that has ``core``. Its version is the
distribution's (the ``dist-info`` directory's name, beside it), else its
``package_info.py``'s ``MAJOR`` / ``MINOR`` / ``PATCH``, read as text with the guards of
every file megaplug reads (a regular file, size-capped, never blocking; bytes that are not
UTF-8 do not stop the numbers being read). A ``package_info.py`` that cannot be read (a FIFO,
a device, too big) is a problem, never a hang: the version is then unknown and must be
stated (``--assume megatron_core=VERSION``).

Only ``os`` calls: no finder is asked (asking one caches it for the process, which the flag
table's snapshot would then depend on), nothing is imported.
"""

from __future__ import annotations

import os
import sys

from .._startup import Unreadable, read_small_text, version_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Iterator

    #: (version or None, where it was read, the problem that kept it from being read).
    Found = tuple[str | None, str, str | None]

#: The distribution whose version is Megatron's (compared normalized: ``megatron-core`` too).
DISTRIBUTION = "megatron_core"

_MEMO: dict[tuple[object, ...], Found] = {}


def local_megatron() -> Found:
    """(version, where it was read, problem) of the Megatron this process imports or would
    import: (None, why not, None) when there is none; (None, where, why) when its version
    cannot be read. Memoised per ``sys.path``."""
    imported = sys.modules.get("megatron.core")
    key = (tuple(entry for entry in sys.path if isinstance(entry, str)), imported is not None)
    if key not in _MEMO:
        _MEMO[key] = _imported_version(imported) if imported else _importable_version()
    return _MEMO[key]


def forget_local_megatron() -> None:
    """Drop the memo (tests that change what is importable)."""
    _MEMO.clear()


def _imported_version(core: object) -> Found:
    info = sys.modules.get("megatron.core.package_info")
    version = getattr(info, "__version__", None)
    if isinstance(version, str):
        return version, "imported megatron.core", None
    path = getattr(core, "__file__", None)
    if not isinstance(path, str):
        return None, "imported megatron.core, no version", None
    version, problem = package_info_version(os.path.dirname(path))
    return version, "imported megatron.core" if version or problem else \
        "imported megatron.core, no version", problem


def _importable_version() -> Found:
    """The ``megatron.core`` the import system would find, as the module docstring says."""
    portions: list[tuple[str, str]] = []
    for root in _path_entries():
        location = os.path.join(root, "megatron")
        if os.path.isfile(os.path.join(location, "__init__.py")):
            return _version_of(root, location)  # a regular package: it wins outright
        if os.path.isfile(location + ".py"):
            return None, f"{location}.py is a module named megatron, not megatron-core", None
        if os.path.isdir(location):
            portions.append((root, location))
    for root, location in portions:  # the namespace: megatron.core from its first portion
        if os.path.isdir(os.path.join(location, "core")):
            return _version_of(root, location)
    if portions:
        return None, f"megatron importable here ({portions[0][1]}), without megatron.core", None
    return None, "no megatron-core installed or stated", None


def _path_entries() -> Iterator[str]:
    for entry in sys.path:
        if isinstance(entry, str):
            yield entry or os.getcwd()


def _version_of(root: str, location: str) -> Found:
    """The version of the megatron-core at ``location`` (``root/megatron``)."""
    installed = version_in(root, (DISTRIBUTION,))
    if installed is not None:
        return installed, "installed megatron-core", None
    version, problem = package_info_version(os.path.join(location, "core"))
    source = f"megatron.core's package_info in {location}"
    if version is not None or problem is not None:
        return version, source, problem
    return None, "megatron importable here, without a version", None


def package_info_version(core_dir: str) -> tuple[str | None, str | None]:
    """(``MAJOR.MINOR.PATCH`` from ``core_dir/package_info.py``'s assignments, read as
    text, or None; the problem that kept the file from being read, or None)."""
    path = os.path.join(core_dir, "package_info.py")
    try:
        text = read_small_text(path)
    except Unreadable as error:
        return None, f"megatron-core's version cannot be read: {error}"
    if text is None:
        return None, None
    numbers: dict[str, str] = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        value = value.split("#")[0].strip()
        if equals and name.strip() in ("MAJOR", "MINOR", "PATCH") and _is_number(value):
            numbers.setdefault(name.strip(), value)
    if len(numbers) < 3:
        return None, None
    return f"{numbers['MAJOR']}.{numbers['MINOR']}.{numbers['PATCH']}", None


def _is_number(text: str) -> bool:
    return text.isascii() and text.isdigit() and len(text) <= 6
