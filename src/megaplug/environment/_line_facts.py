"""Flag facts that depend on the release line of a package the target runs.

A plugin's settings are declared once, as megaplug's newest line has them. Where another
line of a package differs -- Megatron 0.15 has ``--use-legacy-models``, lacks
``--muon-tp-mode``'s newer default -- the plugin binds :class:`LineFacts` to its options
class (``__megaplug_line_facts__ = "pkg.megatron_releases:FACTS"``, generated data), and
:func:`narrow` gives a flag table the target line's own flags and facts. The kernel knows
no line by name: it hands :func:`narrow` the target's lines
(:meth:`TargetEnvironment.release_lines`) and the table.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

#: The facts a line may state differently from the declaration.
FACT_FIELDS = ("type", "default", "choices", "nargs", "const", "action", "option_strings")


class LineFacts:
    """How a plugin's flags differ between the release lines of ``package``.

    ``lines``: every line the facts describe, oldest first. ``settings``: per flag (by the
    option string it is declared with first), ``"lines"``: the lines that have it (absent:
    all), and per fact of :data:`FACT_FIELDS` that some line states differently, ``{line:
    value}`` for those lines, values encoded as measured (an enum member as
    ``"Class.member"``; a type as ``"int"``, ``"float"``, ``"str"``, ``"bool"`` or None). ``extra``: flags the plugin has only in some lines, as those lines'
    parsers declare them (``option_strings``, ``dest``, ``action``, ``type`` -- ``"int"``,
    ``"float"``, ``"str"``, ``"bool"`` or None --, ``default``, ``choices``, ``nargs``,
    ``const``, and ``lines``): a flag an older release has and megaplug's newest line does
    not, or one whose setting a line names differently. A line not in ``lines`` keeps the
    declaration as written.
    """

    __slots__ = ("package", "lines", "settings", "extra")

    def __init__(self, package: str, lines: tuple[str, ...],
                 settings: dict[str, dict[str, Any]],
                 extra: tuple[dict[str, Any], ...] = ()) -> None:
        self.package, self.lines, self.settings = package, tuple(lines), settings
        self.extra = tuple(extra)

    def __repr__(self) -> str:
        return f"LineFacts({self.package!r}, {len(self.settings)} flags, lines {self.lines})"


def narrow(table: Any, lines: Mapping[str, str]) -> None:
    """Make ``table`` (a FlagTable) the flags of ``lines``: each plugin's :class:`LineFacts`
    for the line the target runs applied -- a flag that line lacks withheld (its spellings
    remembered in ``table.elsewhere`` with the lines that have it), every other fact the
    line states different replaced."""
    if not table.line_facts:
        return
    from .._registry import resolve_reference

    where: dict[str, list[tuple[str, str]]] = {}
    for plugin, facts in list(table.line_facts.items()):
        if isinstance(facts, str):
            facts = table.line_facts[plugin] = resolve_reference(facts)
        if not isinstance(facts, LineFacts):
            raise TypeError(f"plugin {plugin!r}: its line facts are a {type(facts).__name__}, "
                            "not LineFacts")
        # named by none, the line is the newest the facts describe
        line = lines.get(facts.package, facts.lines[-1])
        if line in facts.lines:
            _apply(table, plugin, facts, line, where)
    _reindex(table)
    for option, found in where.items():  # (package, line) pairs
        package = found[0][0]
        table.elsewhere[option] = f"{package} {', '.join(dict.fromkeys(l for _, l in found))}"


def _apply(table: Any, plugin: str, facts: LineFacts, line: str,
           where: dict[str, list[tuple[str, str]]]) -> None:
    """One plugin's facts for ``line``: its flags withheld or restated, its extra flags of
    that line added, and where the flags it lacks exist noted in ``where``."""
    for spec in [spec for spec in table.specs if spec.plugin == plugin]:
        stated = facts.settings.get(spec.primary)
        if stated is None:
            continue
        present = stated.get("lines")
        if present is not None and line not in present:
            _withhold(table, spec, [(facts.package, one) for one in present], where)
        else:
            _restate(spec, stated, line)
    declared = {option for spec in table.specs for option in spec.option_strings}
    for flag in facts.extra:
        if line in flag["lines"]:
            if not declared.intersection(flag["option_strings"]):  # else another plugin's
                _place(table.specs, _extra_spec(flag, plugin))
        else:
            for option in flag["option_strings"]:
                where.setdefault(option, []).extend(
                    (facts.package, one) for one in flag["lines"])


def _place(specs: list[Any], spec: Any) -> None:
    """Add a line's own flag ahead of the specs already declaring its setting (a computed
    one): the first flag declaring a setting gives its default, as in argparse. ``extra``
    lists a line's flags in the order that line's parser declares them."""
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


def _extra_spec(flag: Mapping[str, Any], plugin: str) -> Any:
    from .._options import FlagSpec

    action = flag["action"]
    takes_value = action in ("store", "append")
    return FlagSpec(flag["dest"], plugin, "flag", tuple(flag["option_strings"]), action,
                    _TYPES[flag["type"]], flag["default"],
                    tuple(flag["choices"]) if flag["choices"] is not None else None,
                    flag["nargs"] if takes_value else None, flag["const"],
                    help=f"(only in {', '.join(flag['lines'])})")


def _restate(spec: Any, stated: Mapping[str, Any], line: str) -> None:
    for field in FACT_FIELDS:
        by_line = stated.get(field)
        if by_line is not None and line in by_line:
            value = by_line[line]
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
    """Give rules the settings the target's release line lacks, at their declared defaults
    (what they read in megaplug's newest line); the kernel leaves them out of the result.
    A setting the line names differently (0.13's ``--norm-epsilon`` sets ``norm_epsilon``,
    megaplug's ``layernorm_epsilon``) takes instead the value given to the line's own
    setting (:func:`renamed_settings`), so the rules reading it see the launch's value.
    ``default_of(plugin)`` is the kernel's provenance of a plugin's declared default (this
    package sits below the kernel and does not import it). Returns the settings filled."""
    from ..values._encoding import fresh

    withheld = [dest for dest in table.withheld if dest not in values]
    renamed = renamed_settings(table)
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


#: Actions a renamed flag may have on both sides: the same, or a switch read the other way
#: round (0.13's ``--disable-mamba-mem-eff-path`` sets ``disable_mamba_mem_eff_path``,
#: megaplug's the inverse ``use_mamba_mem_eff_path``).
_SWITCHES = {"store_true", "store_false"}


def drop_withheld(table: Any, values: dict[str, Any], provenance: dict[str, Any],
                  withheld: list[str]) -> None:
    """Take the settings :func:`fill_withheld` gave the rules back out of the result. Where
    a rule changed one the line names differently (a fake process group turns off Gloo
    groups: megaplug's ``use_gloo_process_groups``, 0.16's ``enable_gloo_process_groups``),
    the line's own setting takes the new value first, as that release's rule sets it."""
    renamed = renamed_settings(table)
    for dest in withheld:
        value, given = values.pop(dest, None), provenance.pop(dest, None)
        if dest in renamed and given is not None and given.source in ("normalized", "derived"):
            theirs, inverted = renamed[dest]
            if theirs in values:
                values[theirs] = (not value) if inverted else value
                provenance[theirs] = given


def renamed_settings(table: Any) -> dict[str, tuple[str, bool]]:
    """The settings of megaplug's newest line that the table's line names differently:
    withheld setting -> (the line's own setting, whether its value reads the other way
    round). Found from the flags: a withheld flag one of whose spellings the line gives to
    another setting, of the same kind (both switches, or both taking a value with the same
    arity) -- else the line's setting means something else and is left alone."""
    found: dict[str, tuple[str, bool]] = {}
    for dest, specs in table.withheld.items():
        for spec in specs:
            for option in spec.option_strings:
                theirs = table.by_option.get(option)
                if theirs is None or theirs.dest == dest or theirs.dest in table.withheld:
                    continue
                same_kind = _same_kind(spec, theirs)
                if same_kind is not None:
                    found.setdefault(dest, (theirs.dest, not same_kind))
    return found


def _same_kind(ours: Any, theirs: Any) -> bool | None:
    """True: the two flags set the same value; False: switches that set opposite values;
    None: not comparable (different actions or arity)."""
    if ours.action in _SWITCHES and theirs.action in _SWITCHES:
        return ours.action == theirs.action
    if ours.action != theirs.action or (ours.nargs is None) != (theirs.nargs is None):
        return None
    return True


def report_lines(target: Any, sink: Any) -> None:
    """What a resolve reports about the target's release lines: a version no line is for
    (a problem), or one newer than every line (a warning)."""
    for message, is_problem in target.line_problems():
        if is_problem:
            sink.error(message, hint="state a supported version with --assume "
                       "megatron_core=VERSION")
        else:
            sink.warn(message)
