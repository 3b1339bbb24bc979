"""Which Megatron release line the target runs, and where that came from.

A line is one supported release (``"0.13"`` ... ``"0.19"``), Megatron-LM ``"main"``, or
``"seed"``, megaplug's own (main plus the seed's newer flags). The version is read from what
states it (``--assume megatron_core=0.17.1``), else from the Megatron this process would
import, without importing it (``_detection``) -- else none: the newest line.
"""

from __future__ import annotations

from ._detection import forget_local_megatron, local_megatron  # noqa: F401  (tests forget it here)
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
    version, source, problem = local_megatron()
    if problem is not None:  # found, but its version could not be read
        return LineChoice(NEWEST, None, source, problem=problem)
    if version is None:
        return LineChoice(NEWEST, None, f"{source}: the newest, {NEWEST}")
    return line_of(version, source)


def line_index(line: str) -> int:
    """A line's place in release order (``ValueError`` for a label that is no line)."""
    if line not in LINES:
        raise ValueError(f"{line!r} is not a {PACKAGE} line; the lines are {', '.join(LINES)}")
    return list(LINES).index(line)
