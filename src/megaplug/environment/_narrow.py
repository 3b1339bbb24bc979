"""The flag table of one megatron-core release, as a value.

A plugin's settings are declared once, as megaplug's newest release has them. Where another
release differs -- Megatron 0.15.3 has ``--use-legacy-models``, 0.17.0 defaults
``--moe-hybridep-num-sms`` to 16 -- the plugin's :class:`~._release_data.ReleaseData` says
so, and :func:`narrow` returns the declared table narrowed to the target release: its own
flags, facts and renamed settings, a new table built through the table's own builder (the
declared one and its specs are left as they are). The kernel knows no release by name: it
hands :func:`narrow` the target's releases (:meth:`TargetEnvironment.release_lines`).
This package sits below the kernel and imports none of its pipeline: a spec is copied
through its own class, a table built through its own builder.
"""

from __future__ import annotations

from ._release_data import FACT_FIELDS, ReleaseData

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, None: None}


def narrow(table: Any, lines: Mapping[str, str]) -> Any:
    """``table`` (a FlagTable) narrowed to ``lines`` (package -> release): for each plugin's
    release data describing the release the target runs, a flag that release lacks is
    withheld (its spellings and the releases having it in ``elsewhere``), every other fact
    the release states differently restated, the release's extra flags added, and the
    settings it names differently in ``renamed``. A table without release data is itself."""
    if not table.release_data:
        return table
    data_of = {plugin: ReleaseData.read(data) if isinstance(data, str) else data
               for plugin, data in table.release_data.items()}
    specs = list(table.specs)
    withheld: dict[str, list[Any]] = {}
    where: dict[str, list[tuple[str, str]]] = {}
    renamed: dict[str, tuple[str, bool]] = {}
    for plugin, data in data_of.items():
        release = lines.get(data.package, data.releases[-1])  # none named: the newest
        if data.describes(release):
            _apply(specs, plugin, data, release, withheld, where)
            renamed.update(_renamed(data, release))
    elsewhere = {option: f"{found[0][0]} {', '.join(dict.fromkeys(r for _, r in found))}"
                 for option, found in where.items()}  # (package, release) pairs
    return type(table).assemble(
        specs, options_classes=table.options_classes, mutex_groups=table.mutex_groups,
        release_data=data_of, withheld=withheld, elsewhere=elsewhere, renamed=renamed)


def _apply(specs: list[Any], plugin: str, data: ReleaseData, release: str,
           withheld: dict[str, list[Any]], where: dict[str, list[tuple[str, str]]]) -> None:
    """One plugin's facts for ``release``, on ``specs`` (the list being built): its flags
    withheld or restated, its extra flags of that release added, and where the flags it
    lacks exist noted in ``where``."""
    gone: set[int] = set()
    for index, spec in [(i, s) for i, s in enumerate(specs) if s.plugin == plugin]:
        stated = data.flags.get(spec.primary)
        if stated is None:
            continue
        present = stated.get("releases")
        if present is not None and not data.within(present, release):
            withheld.setdefault(spec.dest, []).append(spec)
            gone.add(index)
            for option in spec.option_strings:
                where.setdefault(option, []).extend(
                    (data.package, one) for one in data.releases_in(present))
        else:
            specs[index] = _restated(spec, stated, data, release)
    specs[:] = [spec for index, spec in enumerate(specs) if index not in gone]
    declared = {option for spec in specs for option in spec.option_strings}
    for flag in data.extra:
        if data.within(flag["releases"], release):
            if not declared.intersection(flag["option_strings"]):  # else another plugin's
                _place(specs, _extra_spec(flag, plugin))
        else:
            for option in flag["option_strings"]:
                where.setdefault(option, []).extend(
                    (data.package, one) for one in data.releases_in(flag["releases"]))


def _renamed(data: ReleaseData, release: str) -> dict[str, tuple[str, bool]]:
    return {dest: (run["dest"], bool(run["inverted"])) for dest, runs in data.renamed.items()
            for run in runs if data.within(run["releases"], release)}


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


def _extra_spec(flag: Mapping[str, Any], plugin: str) -> Any:
    from .._options import FlagSpec  # a value record, as sources/ builds them too

    action = flag["action"]
    takes_value = action in ("store", "append")
    return FlagSpec(flag["dest"], plugin, "flag", tuple(flag["option_strings"]), action,
                    _TYPES[flag["type"]], flag["default"],
                    tuple(flag["choices"]) if flag["choices"] is not None else None,
                    flag["nargs"] if takes_value else None, flag["const"],
                    help=f"(only in {_in_words(flag['releases'])})")


def _in_words(runs: Any) -> str:
    return ", ".join(first if first == last else f"{first} to {last}" for first, last in runs)


def _restated(spec: Any, stated: Mapping[str, Any], data: ReleaseData, release: str) -> Any:
    """A copy of ``spec`` with the facts ``release`` states differently (``spec`` itself
    where it states none)."""
    changes: dict[str, Any] = {}
    for field in FACT_FIELDS:
        runs = stated.get(field)
        found, value = data.value_at(runs, release) if runs is not None else (False, None)
        if not found:
            continue
        if field == "option_strings":
            value = tuple(value)
        elif field == "type":  # a builtin's name, or None: the value as text
            value = _TYPES[value]
        elif field in ("default", "choices", "const"):
            value = _value_for(changes.get("type", spec.type), value)
            if field == "choices" and value is not None:
                value = tuple(value)
        changes[field] = value
    if not changes:
        return spec
    fields = {name: getattr(spec, name) for name in spec.__slots__}
    return type(spec)(**{**fields, **changes})


def _value_for(kind: Any, value: Any) -> Any:
    """A measured value (JSON, an enum member as ``"Class.member"``) in the flag's type."""
    if isinstance(value, list):
        return [_value_for(kind, item) for item in value]
    if not isinstance(value, str) or kind in (None, str):
        return value
    try:
        return kind(value)
    except (TypeError, ValueError, ArithmeticError):
        return value


def withheld_defaults(table: Any, values: Mapping[str, Any], provenance: Mapping[str, Any],
                      provenance_class: Callable[..., Any]
                      ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The settings the target's release lacks, as rules read them (values, provenance):
    their declared defaults (what they read in megaplug's newest release); a setting the
    release names differently (``table.renamed``: 0.13's ``--norm-epsilon`` sets
    ``norm_epsilon``, megaplug's ``layernorm_epsilon``) at the value given to the release's
    own setting, so the rules reading it see the launch's value. ``provenance_class`` is the
    kernel's ``Provenance`` (this package sits below the kernel and does not import it)."""
    from ..values._encoding import fresh

    filled: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    for dest in (dest for dest in table.withheld if dest not in values):
        spec = table.withheld[dest][0]
        filled[dest] = fresh(spec.default)
        sources[dest] = provenance_class("default", plugin=spec.plugin)
        theirs, inverted = table.renamed.get(dest, (None, False))
        given = provenance.get(theirs) if theirs is not None else None
        if theirs in values and given is not None and given.source != "default":
            filled[dest] = (not values[theirs]) if inverted else fresh(values[theirs])
            sources[dest] = given
    return filled, sources


def back_to_release(table: Any, taken: Mapping[str, tuple[Any, Any]],
                    values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the withheld settings ``taken`` out of the result (dest -> (value, provenance))
    leave to the release's own settings: where a rule changed one the release names
    differently (a fake process group turns off Gloo groups: megaplug's
    ``use_gloo_process_groups``, 0.16's ``enable_gloo_process_groups``), the release's own
    setting takes the new value, as that release's rule sets it."""
    changed: dict[str, Any] = {}
    sources: dict[str, Any] = {}
    for dest, (value, given) in taken.items():
        theirs, inverted = table.renamed.get(dest, (None, False))
        if theirs in values and given is not None and given.source in ("normalized", "derived"):
            changed[theirs] = (not value) if inverted else value
            sources[theirs] = given
    return changed, sources


def report_lines(target: Any, sink: Any) -> None:
    """What a resolve reports about the target's release: a version no release is for (a
    problem), or one newer than every release (a warning)."""
    for message, is_problem in target.line_problems():
        if is_problem:
            sink.error(message, hint="state a supported version with --assume "
                       "megatron_core=VERSION")
        else:
            sink.warn(message)
