"""Which Megatron release line the target runs, and where that came from.

A line is one supported release (``"0.13"`` ... ``"0.19"``), Megatron-LM ``"main"``, or
``"seed"``, megaplug's own (main plus the seed's newer flags). The version is read from what
states it (``--assume megatron_core=0.17.1``), else from the Megatron this process would
import -- without importing it: an imported ``megatron.core``'s ``package_info``, the
``megatron-core`` distribution's metadata beside the package, or the package's own
``package_info.py`` read as text (a source checkout) -- else none: the newest line.
"""

from __future__ import annotations

import os
import sys

from .._startup import version_in
from ._megatron_lines import LINES, PACKAGE

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

#: The line chosen when no version is known: megaplug's own.
NEWEST = next(reversed(LINES))
#: Versions that name a line directly (``--assume megatron_core=main``).
NAMED_LINES = ("main", "seed")
_BY_MINOR = {minor: line for line, (_, minor) in LINES.items() if minor is not None}
_OLDEST = next(iter(LINES))


class LineChoice:
    """The line a target runs: ``line``, the ``version`` it came from (``None``: none
    known), ``source`` (where the version came from, in words), and ``warning`` /
    ``problem`` (a version megaplug does not know: the newest line is used)."""

    __slots__ = ("line", "version", "source", "warning", "problem")

    def __init__(self, line: str, version: str | None, source: str,
                 warning: str | None = None, problem: str | None = None) -> None:
        self.line, self.version, self.source = line, version, source
        self.warning, self.problem = warning, problem

    def describe(self) -> str:
        """``'0.17 (megatron_core 0.17.1, stated with --assume)'``."""
        found = f"{PACKAGE} {self.version}, " if self.version not in (None, self.line) else ""
        return f"{self.line} ({found}{self.source})"

    def to_dict(self) -> dict[str, str | None]:
        """The choice as data (``megaplug list --json``): ``line``, ``version``, ``source``,
        ``described`` (:meth:`describe`), ``warning`` and ``problem``."""
        return {"line": self.line, "version": self.version, "source": self.source,
                "described": self.describe(), "warning": self.warning,
                "problem": self.problem}

    def __repr__(self) -> str:
        return f"LineChoice({self.describe()!r})"


def supported_range() -> str:
    """The supported versions, in words, for a message."""
    numbered = [line for line, (_, minor) in LINES.items() if line[:1].isdigit()]
    named = [f"{line} ({minor[0]}.{minor[1]}.x)" if minor else line
             for line, (_, minor) in LINES.items() if not line[:1].isdigit()]
    return f"{PACKAGE} {numbered[0]} to {numbered[-1]}, {' or '.join(named)}"


def line_of(version: str, source: str) -> LineChoice:
    """The line a version selects: a patch of a known minor is that minor; a newer version
    is the newest line, with a warning; an older or unparseable one is a problem (and the
    newest line, so that resolving can go on and report everything else)."""
    if version in LINES:
        return LineChoice(version, version, source)
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isascii() and parts[0].isdigit()):
        return _not_understood(version, source)
    minor_text = ""
    for character in parts[1]:  # the leading digits: "0rc1" is 0
        if not (character.isascii() and character.isdigit()):
            break
        minor_text += character
    if not minor_text:
        return _not_understood(version, source)
    minor = (int(parts[0]), int(minor_text))
    if minor in _BY_MINOR:
        return LineChoice(_BY_MINOR[minor], version, source)
    newest_known = max(_BY_MINOR)
    if minor > newest_known:
        return LineChoice(NEWEST, version, source, warning=(
            f"{PACKAGE} {version} ({source}) is newer than any line megaplug knows; resolving "
            f"as {NEWEST}, the newest (supported: {supported_range()})"))
    return LineChoice(NEWEST, version, source, problem=(
        f"{PACKAGE} {version} ({source}) is older than megaplug supports "
        f"(supported: {supported_range()})"))


def _not_understood(version: str, source: str) -> LineChoice:
    return LineChoice(NEWEST, version, source, problem=(
        f"{PACKAGE} {version!r} ({source}) is not a version "
        f"(supported: {supported_range()})"))


def choose_line(stated: Mapping[str, str | None]) -> LineChoice:
    """The target's line: the stated version if any, else this process's Megatron."""
    if PACKAGE in stated:
        version = stated[PACKAGE]
        if version is None:
            return LineChoice(NEWEST, None, f"stated as not installed: the newest, {NEWEST}")
        return line_of(version, "as stated")
    version, source = local_megatron()
    if version is None:
        return LineChoice(NEWEST, None, f"{source}: the newest, {NEWEST}")
    return line_of(version, source)


_MEMO: dict[tuple[object, ...], tuple[str | None, str]] = {}


def local_megatron() -> tuple[str | None, str]:
    """(version, where it was read) of the Megatron this process imports or would import;
    (None, why not) when there is none. Memoised per ``sys.path``."""
    imported = sys.modules.get("megatron.core")
    key = (tuple(sys.path), imported is not None)
    if key not in _MEMO:
        _MEMO[key] = _imported_version(imported) if imported else _importable_version()
    return _MEMO[key]


def forget_local_megatron() -> None:
    """Drop the memo (tests that change what is importable)."""
    _MEMO.clear()


def _imported_version(core: object) -> tuple[str | None, str]:
    info = sys.modules.get("megatron.core.package_info")
    version = getattr(info, "__version__", None)
    if isinstance(version, str):
        return version, "imported megatron.core"
    path = getattr(core, "__file__", None)
    found = _package_info_version(os.path.dirname(path)) if path else None
    return found, "imported megatron.core" if found else "imported megatron.core, no version"


def _importable_version() -> tuple[str | None, str]:
    """The first ``megatron`` package on ``sys.path``, as the import system would find it,
    looked for with a stat per entry: no finder is asked (asking one caches it for the
    process, which the flag table's snapshot would then depend on)."""
    for entry in sys.path:
        location = os.path.join(entry or os.getcwd(), "megatron")
        if not os.path.isfile(os.path.join(location, "__init__.py")):
            continue
        installed = version_in(entry or os.getcwd(), (PACKAGE,))
        if installed is not None:
            return installed, "installed megatron-core"
        found = _package_info_version(os.path.join(location, "core"))
        if found is not None:
            return found, f"megatron.core's package_info in {location}"
        return None, "megatron importable here, without a version"
    return None, "no megatron-core installed or stated"


def _package_info_version(core_dir: str) -> str | None:
    """``MAJOR.MINOR.PATCH`` from ``package_info.py``'s assignments, read as text."""
    try:
        with open(os.path.join(core_dir, "package_info.py"), encoding="utf-8") as handle:
            text = handle.read(65536)
    except OSError:
        return None
    numbers: dict[str, str] = {}
    for line in text.splitlines():
        name, equals, value = line.partition("=")
        value = value.split("#")[0].strip()
        if equals and name.strip() in ("MAJOR", "MINOR", "PATCH") and value.isdigit():
            numbers.setdefault(name.strip(), value)
    if len(numbers) < 3:
        return None
    return f"{numbers['MAJOR']}.{numbers['MINOR']}.{numbers['PATCH']}"


def line_index(line: str) -> int:
    """A line's place in release order (``ValueError`` for a label that is no line)."""
    if line not in LINES:
        raise ValueError(f"{line!r} is not a {PACKAGE} line; the lines are {', '.join(LINES)}")
    return list(LINES).index(line)
