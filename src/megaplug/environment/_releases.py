"""Which megatron-core release the target runs, and where that came from.

Every published megatron-core release is its own target (``"0.13.0"`` ... ``"0.19.2"``,
each tag and each wheel, measured off its own code), as are Megatron-LM ``"main"`` and
``"seed"``, megaplug's own (main plus the seed's newer flags). The releases, oldest first,
are data: ``megatron_releases.json`` beside this module, written by
scripts/gen_megatron_releases.py. A version is read from what states it (``--assume
megatron_core=0.17.1``), else from the Megatron this process would import, without
importing it (``_detection``) -- else none: the newest. A version megaplug did not measure
resolves to the nearest earlier measured release and says so; a pre-release (``rc``,
``dev``) to its release.
"""

from __future__ import annotations

import json
import os

from ._detection import forget_local_megatron, local_megatron  # noqa: F401  (tests forget it here)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping


def _read_releases() -> tuple[str, dict[str, tuple[int, int, int] | None], dict[str, str]]:
    path = os.path.join(os.path.dirname(__file__), "megatron_releases.json")
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    versions = {row["release"]: tuple(row["version"]) if row["version"] else None
                for row in data["releases"]}
    return data["package"], versions, {row["release"]: row["measured"] for row in data["releases"]}


#: The import name whose release is targeted (``--assume megatron_core=0.17.1``); each
#: release, oldest first, and the (major, minor, patch) it reports (``seed``: none); what
#: was measured for each (``tag core_v0.17.1``, ``wheel megatron-core==0.19.2``, ...).
PACKAGE, VERSIONS, MEASURED = _read_releases()
RELEASES = tuple(VERSIONS)
#: The release chosen when no version is known: megaplug's own.
NEWEST = RELEASES[-1]
#: Releases a version names by label rather than number (``--assume megatron_core=main``).
NAMED_RELEASES = tuple(release for release in RELEASES if not release[:1].isdigit())
_PLACE = {release: place for place, release in enumerate(RELEASES)}
_NUMBERED = [(version, release) for release, version in VERSIONS.items() if version]


class LineChoice:
    """The release a target runs: ``line`` (the measured release in force: ``"0.17.0"``,
    ``"main"``), the ``version`` it came from (``None``: none known), ``source`` (where the
    version came from, in words), ``note`` (how a version megaplug did not measure maps to
    ``line``), and ``warning`` / ``problem`` (a version megaplug does not know: the newest
    release is used)."""

    __slots__ = ("line", "version", "source", "note", "warning", "problem")

    def __init__(self, line: str, version: str | None, source: str,
                 warning: str | None = None, problem: str | None = None,
                 note: str | None = None) -> None:
        self.line, self.version, self.source = line, version, source
        self.warning, self.problem, self.note = warning, problem, note

    def describe(self) -> str:
        """``'0.19.0 (megatron_core 0.19.1, as stated; not measured: the nearest earlier
        measured release)'``."""
        found = f"{PACKAGE} {self.version}, " if self.version not in (None, self.line) else ""
        note = f"; {self.note}" if self.note else ""
        return f"{self.line} ({found}{self.source}{note})"

    def to_dict(self) -> dict[str, str | None]:
        """The choice as data (``megaplug list --json``): ``line`` (the release in force),
        ``version``, ``source``, ``note``, ``described`` (:meth:`describe`), ``warning``
        and ``problem``."""
        return {"line": self.line, "version": self.version, "source": self.source,
                "note": self.note, "described": self.describe(), "warning": self.warning,
                "problem": self.problem}

    def __repr__(self) -> str:
        return f"LineChoice({self.describe()!r})"


def supported_range() -> str:
    """The supported versions, in words, for a message."""
    numbered = [release for release in RELEASES if release[:1].isdigit()]
    named = [f"{release} ({'.'.join(map(str, VERSIONS[release]))})" if VERSIONS[release]
             else release for release in NAMED_RELEASES]
    return f"{PACKAGE} {numbered[0]} to {numbered[-1]}, {' or '.join(named)}"


def _numbers(version: str) -> tuple[tuple[int, int, int], str] | None:
    """``"0.17.0rc1"`` -> ``((0, 17, 0), "rc1")``; ``"0.17"`` -> ``((0, 17, 0), "")``; None
    for text that is no version."""
    parts: list[int] = []
    rest = version
    while len(parts) < 3:
        digits = ""
        for character in rest:
            if not (character.isascii() and character.isdigit()):
                break
            digits += character
        if not digits:
            break
        parts.append(int(digits))
        rest = rest[len(digits):]
        if len(parts) < 3 and rest.startswith(".") and rest[1:2].isdigit():
            rest = rest[1:]
        else:
            break
    if len(parts) < 2:
        return None
    return (parts[0], parts[1], parts[2] if len(parts) > 2 else 0), rest.lstrip(".-_+")


def _build_kind(version: str, suffix: str) -> str:
    """What a version's text after its release numbers makes it (PEP 440's words): ``rc1``
    a pre-release, ``post1`` a post-release, ``+local`` a local build."""
    if suffix.startswith("post"):
        return "a post-release"
    if suffix.startswith("dev"):
        return "a development build"
    if "+" in version and not _numbers(version.split("+", 1)[0])[1]:  # type: ignore[index]
        return "a local build"
    return "a pre-release"


def line_of(version: str, source: str) -> LineChoice:
    """The release a version selects: a measured release is itself, a pre-release its
    release, an unmeasured version between two measured ones the nearest earlier (said in
    the choice's ``note``); a version of a minor newer than every release is the newest,
    with a warning; an older or unparseable one is a problem (and the newest release, so
    that resolving can go on and report everything else)."""
    if version in _PLACE:
        return LineChoice(version, version, source)
    parsed = _numbers(version)
    if parsed is None:
        return _not_understood(version, source)
    numbers, suffix = parsed
    exact = next((release for found, release in _NUMBERED if found == numbers), None)
    if exact is not None:
        note = (f"{_build_kind(version, suffix)} of {exact}, resolved as that release"
                if suffix else None)
        return LineChoice(exact, version, source, note=note)
    newest_minor = max(found[:2] for found, _ in _NUMBERED)
    if numbers[:2] > newest_minor:
        return LineChoice(NEWEST, version, source, warning=(
            f"{PACKAGE} {version} ({source}) is newer than any release megaplug knows; "
            f"resolving as {NEWEST}, the newest (supported: {supported_range()})"))
    earlier = [(found, release) for found, release in _NUMBERED if found < numbers]
    if not earlier:
        return LineChoice(NEWEST, version, source, problem=(
            f"{PACKAGE} {version} ({source}) is older than megaplug supports "
            f"(supported: {supported_range()})"))
    nearest = max(earlier)[1]
    return LineChoice(nearest, version, source, note=(
        f"{version} was not measured: resolved as {nearest}, the nearest earlier measured "
        "release"))


def _not_understood(version: str, source: str) -> LineChoice:
    return LineChoice(NEWEST, version, source, problem=(
        f"{PACKAGE} {version!r} ({source}) is not a version "
        f"(supported: {supported_range()})"))


def choose_line(stated: Mapping[str, str | None]) -> LineChoice:
    """The target's release: the stated version if any, else this process's Megatron."""
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


class MegatronRelease:
    """The megatron-core release a target runs, for rule conditions: the one way a rule
    asks which release it is judging (``config.env.megatron.between("0.16.0", "0.17.1")``).

    Every bound is a measured release (``ValueError`` for anything else: a condition names
    the exact release whose code it follows), compared in release order, ``main`` and
    ``seed`` last; ranges are inclusive."""

    __slots__ = ("release", "_place")

    def __init__(self, release: str) -> None:
        #: The measured release in force (``"0.17.0"``, ``"main"``, ``"seed"``).
        self.release = release
        self._place = place_of(release)

    def at_least(self, first: str) -> bool:
        """Whether the target is ``first`` or a later release."""
        return self._place >= place_of(first)

    def before(self, release: str) -> bool:
        """Whether the target is older than ``release``."""
        return self._place < place_of(release)

    def between(self, first: str, last: str) -> bool:
        """Whether the target is ``first``, ``last`` or a release between them."""
        return place_of(first) <= self._place <= place_of(last)

    def __str__(self) -> str:
        return self.release

    def __repr__(self) -> str:
        return f"MegatronRelease({self.release!r})"


def place_of(release: str) -> int:
    """A release's place in release order (``ValueError`` for a label that is none)."""
    place = _PLACE.get(release)
    if place is None:
        raise ValueError(f"{release!r} is not a measured {PACKAGE} release; the releases are "
                         f"{', '.join(RELEASES)}")
    return place
