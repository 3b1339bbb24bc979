"""Flag facts that depend on the megatron-core release the target runs.

A plugin's settings are declared once, as megaplug's newest release has them. Where another
release differs -- Megatron 0.15.3 has ``--use-legacy-models``, 0.17.0 defaults
``--moe-hybridep-num-sms`` to 16 -- the plugin ships :class:`ReleaseData`: a
``megatron_releases.json`` beside the module declaring its flags (package data written by
scripts/gen_megatron_releases.py from each release's own parser), and :func:`narrow` gives
a flag table the target release's own flags, facts and renamed settings. The kernel knows no
release by name: it hands :func:`narrow` the target's releases
(:meth:`TargetEnvironment.release_lines`) and the table.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

#: The facts a release may state differently from the declaration.
FACT_FIELDS = ("type", "default", "choices", "nargs", "const", "action", "option_strings")
#: The file a plugin's release data is in, beside the module declaring its flags.
DATA_FILE = "megatron_releases.json"


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


def narrow(table: Any, lines: Mapping[str, str]) -> None:
    """Make ``table`` (a FlagTable) the flags of ``lines`` (package -> release): each
    plugin's :class:`ReleaseData` for the release the target runs applied -- a flag that
    release lacks withheld (its spellings remembered in ``table.elsewhere`` with the releases
    that have it), every other fact the release states different replaced, and the settings
    it names differently noted in ``table.renamed``."""
    if not table.release_data:
        return
    where: dict[str, list[tuple[str, str]]] = {}
    for plugin, data in list(table.release_data.items()):
        if isinstance(data, str):
            data = table.release_data[plugin] = ReleaseData.read(data)
        # named by none, the release is the newest the data describes
        release = lines.get(data.package, data.releases[-1])
        if data.describes(release):
            _apply(table, plugin, data, release, where)
            for dest, runs in data.renamed.items():
                for run in runs:
                    if data.within(run["releases"], release):
                        table.renamed[dest] = (run["dest"], bool(run["inverted"]))
    _reindex(table)
    for option, found in where.items():  # (package, release) pairs
        package = found[0][0]
        table.elsewhere[option] = f"{package} {', '.join(dict.fromkeys(r for _, r in found))}"


def _apply(table: Any, plugin: str, data: ReleaseData, release: str,
           where: dict[str, list[tuple[str, str]]]) -> None:
    """One plugin's facts for ``release``: its flags withheld or restated, its extra flags
    of that release added, and where the flags it lacks exist noted in ``where``."""
    for spec in [spec for spec in table.specs if spec.plugin == plugin]:
        stated = data.flags.get(spec.primary)
        if stated is None:
            continue
        present = stated.get("releases")
        if present is not None and not data.within(present, release):
            _withhold(table, spec, [(data.package, one) for one in data.releases_in(present)],
                      where)
        else:
            _restate(spec, stated, data, release)
    declared = {option for spec in table.specs for option in spec.option_strings}
    for flag in data.extra:
        if data.within(flag["releases"], release):
            if not declared.intersection(flag["option_strings"]):  # else another plugin's
                _place(table.specs, _extra_spec(flag, plugin, data))
        else:
            for option in flag["option_strings"]:
                where.setdefault(option, []).extend(
                    (data.package, one) for one in data.releases_in(flag["releases"]))


def _place(specs: list[Any], spec: Any) -> None:
    """Add a release's own flag ahead of the specs already declaring its setting (a computed
    one): the first flag declaring a setting gives its default, as in argparse. ``extra``
    lists a release's flags in the order that release's parser declares them."""
    first = next((index for index, other in enumerate(specs) if other.dest == spec.dest
                  and other.kind != "flag"), None)
    if first is None:
        specs.append(spec)
    else:
        specs.insert(first, spec)


def _withhold(table: Any, spec: Any, present: list[tuple[str, str]],
              where: dict[str, list[tuple[str, str]]]) -> None:
    table.specs.remove(spec)
    table.withheld.setdefault(spec.dest, []).append(spec)
    for option in spec.option_strings:
        where.setdefault(option, []).extend(present)


_TYPES = {"int": int, "float": float, "str": str, "bool": bool, None: None}


def _extra_spec(flag: Mapping[str, Any], plugin: str, data: ReleaseData) -> Any:
    from .._options import FlagSpec

    action = flag["action"]
    takes_value = action in ("store", "append")
    return FlagSpec(flag["dest"], plugin, "flag", tuple(flag["option_strings"]), action,
                    _TYPES[flag["type"]], flag["default"],
                    tuple(flag["choices"]) if flag["choices"] is not None else None,
                    flag["nargs"] if takes_value else None, flag["const"],
                    help=f"(only in {_in_words(flag['releases'])})")


def _in_words(runs: Any) -> str:
    return ", ".join(first if first == last else f"{first} to {last}" for first, last in runs)


def _restate(spec: Any, stated: Mapping[str, Any], data: ReleaseData, release: str) -> None:
    for field in FACT_FIELDS:
        runs = stated.get(field)
        found, value = data.value_at(runs, release) if runs is not None else (False, None)
        if found:
            if field == "option_strings":
                value = tuple(value)
            elif field == "type":  # a builtin's name, or None: the value as text
                value = _TYPES[value]
            elif field in ("default", "choices", "const"):
                value = _value_for(spec, value)
                if field == "choices" and value is not None:
                    value = tuple(value)
            setattr(spec, field, value)


def _value_for(spec: Any, value: Any) -> Any:
    """A measured value (JSON, an enum member as ``"Class.member"``) in the flag's type."""
    if isinstance(value, list):
        return [_value_for(spec, item) for item in value]
    if not isinstance(value, str) or spec.type in (None, str):
        return value
    try:
        return spec.type(value)
    except (TypeError, ValueError, ArithmeticError):
        return value


def _reindex(table: Any) -> None:
    """Rebuild the table's indexes from its specs (withheld ones left out, and a dest all
    of whose specs are withheld no longer a setting)."""
    specs, table.specs = table.specs, []
    table.by_dest, table.by_option, table.by_env = {}, {}, {}
    for spec in specs:
        table.add(spec)
    for dest in [dest for dest in table.withheld if dest in table.by_dest]:
        del table.withheld[dest]  # only some spellings of it are withheld
    table.mutex_groups = [[dest for dest in group if dest in table.by_dest]
                          for group in table.mutex_groups]


def fill_withheld(table: Any, values: dict[str, Any], provenance: dict[str, Any],
                  default_of: Callable[[str], Any]) -> list[str]:
    """Give rules the settings the target's release lacks, at their declared defaults
    (what they read in megaplug's newest release); the kernel leaves them out of the result.
    A setting the release names differently (0.13's ``--norm-epsilon`` sets
    ``norm_epsilon``, megaplug's ``layernorm_epsilon``: ``table.renamed``, measured) takes
    instead the value given to the release's own setting, so the rules reading it see the
    launch's value. ``default_of(plugin)`` is the kernel's provenance of a plugin's declared
    default (this package sits below the kernel and does not import it). Returns the
    settings filled."""
    from ..values._encoding import fresh

    withheld = [dest for dest in table.withheld if dest not in values]
    renamed = table.renamed
    for dest in withheld:
        spec = table.withheld[dest][0]
        values[dest] = fresh(spec.default)
        provenance[dest] = default_of(spec.plugin)
        if dest in renamed:
            theirs, inverted = renamed[dest]
            given = provenance.get(theirs)
            if theirs in values and given is not None and given.source != "default":
                values[dest] = (not values[theirs]) if inverted else fresh(values[theirs])
                provenance[dest] = given
    return withheld


def drop_withheld(table: Any, values: dict[str, Any], provenance: dict[str, Any],
                  withheld: list[str]) -> None:
    """Take the settings :func:`fill_withheld` gave the rules back out of the result. Where
    a rule changed one the release names differently (a fake process group turns off Gloo
    groups: megaplug's ``use_gloo_process_groups``, 0.16's ``enable_gloo_process_groups``),
    the release's own setting takes the new value first, as that release's rule sets it."""
    renamed = table.renamed
    for dest in withheld:
        value, given = values.pop(dest, None), provenance.pop(dest, None)
        if dest in renamed and given is not None and given.source in ("normalized", "derived"):
            theirs, inverted = renamed[dest]
            if theirs in values:
                values[theirs] = (not value) if inverted else value
                provenance[theirs] = given


def report_lines(target: Any, sink: Any) -> None:
    """What a resolve reports about the target's releases: a version no release is for
    (a problem), or one newer than every release (a warning)."""
    for message, is_problem in target.line_problems():
        if is_problem:
            sink.error(message, hint="state a supported version with --assume "
                       "megatron_core=VERSION")
        else:
            sink.warn(message)
