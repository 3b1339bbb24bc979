"""A plugin's release data: how its flags differ between megatron-core releases.

Each plugin that owns Megatron flags ships ``megatron_releases.json`` (package data beside
the module its ``PluginInfo(options=...)`` names), written by
scripts/gen_megatron_releases.py from each release's own parser: the releases that have each
flag, every fact a release states differently, the flags only some releases have, and the
settings a release names differently. :class:`ReleaseData` reads one;
``environment._narrow.narrow`` gives a flag table the target release's flags from them.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping

#: The facts a release may state differently from the declaration.
FACT_FIELDS = ("type", "default", "choices", "nargs", "const", "action", "option_strings")
#: The file a plugin's release data is in, beside the module declaring its flags.
DATA_FILE = "megatron_releases.json"


def release_data_beside(declaration: Any, declared: Any) -> str | None:
    """The path of the release data beside the module a plugin declares its flags in (its
    ``PluginInfo(options=...)``: a ``"module:NAME"`` reference, or the ``declared`` object
    itself), if it ships one (a stat; the file is read when a table is narrowed)."""
    module_name = (declaration.partition(":")[0] if isinstance(declaration, str)
                   else getattr(declared, "__module__", None))
    location = getattr(sys.modules.get(module_name or ""), "__file__", None)
    if not location:
        return None
    path = os.path.join(os.path.dirname(location), DATA_FILE)
    return path if os.path.isfile(path) else None


class ReleaseData:
    """How a plugin's flags differ between the releases of ``package`` (one plugin's
    ``megatron_releases.json``).

    ``releases``: every release the data describes, oldest first. Releases are named by runs,
    ``[first, last]`` inclusive in that order. ``flags``: per flag (by the option string it
    is declared with first), ``"releases"``: the runs that have it (absent: all), and per
    fact of :data:`FACT_FIELDS` that some release states differently, ``[first, last,
    value]`` runs, values encoded as measured (an enum member as ``"Class.member"``; a type
    as ``"int"``, ``"float"``, ``"str"``, ``"bool"`` or None). ``extra``: flags the plugin
    has only in some releases, as those releases' parsers declare them (``option_strings``,
    ``dest``, ``action``, ``type``, ``default``, ``choices``, ``nargs``, ``const``, and
    ``releases``). ``renamed``: per setting of megaplug's, the runs of releases whose own
    setting of its flags is another (``dest``; ``inverted``: a switch reading the other way
    round). A release not in ``releases`` keeps the declaration as written.
    """

    __slots__ = ("path", "package", "releases", "flags", "extra", "renamed", "_place")

    def __init__(self, data: Mapping[str, Any], path: str = "") -> None:
        #: The file it was read from (``""``: built in memory).
        self.path = path
        self.package: str = data["package"]
        self.releases: tuple[str, ...] = tuple(data["releases"])
        self.flags: dict[str, dict[str, Any]] = dict(data.get("flags", {}))
        self.extra: tuple[dict[str, Any], ...] = tuple(data.get("extra", ()))
        self.renamed: dict[str, list[dict[str, Any]]] = dict(data.get("renamed", {}))
        self._place = {release: place for place, release in enumerate(self.releases)}

    @classmethod
    def read(cls, path: str) -> ReleaseData:
        import json

        with open(path, encoding="utf-8") as handle:
            return cls(json.load(handle), path)

    def describes(self, release: str) -> bool:
        return release in self._place

    def within(self, runs: Any, release: str) -> bool:
        """Whether ``release`` is in one of the ``[first, last]`` runs."""
        place = self._place[release]
        return any(self._place[run[0]] <= place <= self._place[run[1]] for run in runs)

    def value_at(self, runs: Any, release: str) -> tuple[bool, Any]:
        """(whether a ``[first, last, value]`` run holds ``release``, its value)."""
        place = self._place[release]
        for first, last, value in runs:
            if self._place[first] <= place <= self._place[last]:
                return True, value
        return False, None

    def releases_in(self, runs: Any) -> list[str]:
        """Every release the runs name, in release order."""
        return [release for release in self.releases if self.within(runs, release)]

    def __repr__(self) -> str:
        return f"ReleaseData({self.package!r}, {len(self.flags)} flags, {len(self.releases)} " \
               "releases)"
