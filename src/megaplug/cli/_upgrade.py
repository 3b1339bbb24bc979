"""``megaplug upgrade --from A --to B [SOURCE] [-- ARGS]``: what changes for one launch when
it moves from one Megatron release to another.

The launch is the training flags after ``--`` (with any ``--config`` files), or SOURCE: a
config file, a saved ``megaplug resolve`` output or a checkpoint directory, read as
``megaplug diff`` reads them. It is resolved twice, with the Megatron release each side
targets (``--assume megatron_core=A`` / ``=B``), and the report says: the flags it gives that
the target release removed or renamed (with the replacement), the values that change because
a declared default changed (old -> new, from which plugin), the problems the target's
validation now reports and the warnings it newly gives, and the values that change otherwise
(derived ones included). ``--rewrite`` prints the command line for the target release
instead. Exit 1 when anything changes, 0 when nothing does, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os

from ..values._encoding import encode, to_json
from ._parser import EXIT_INTERNAL, EXIT_OK, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

#: The package whose release each side names.
PACKAGE = "megatron_core"
#: megaplug's own tokens among the training flags, kept as they are by ``--rewrite``.
_PASSED_THROUGH = {"-p": True, "--config": True, "--no-autoload": False}


class Side:
    """One release's view of the launch: its line, values, provenance, problems, warnings."""

    def __init__(self, version: str, line: str, kernel: Any, values: dict[str, Any],
                 provenance: dict[str, Any], problems: Sequence[Any],
                 warnings: Sequence[Any]) -> None:
        self.version, self.line, self.kernel = version, line, kernel
        self.values, self.provenance = values, provenance
        self.problems, self.warnings = list(problems), list(warnings)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "line": self.line,
                "problems": [p.to_dict() for p in self.problems],
                "warnings": [w.to_dict() for w in self.warnings]}


def run_upgrade(options: argparse.Namespace, args: list[str]) -> int:
    """The ``upgrade`` command: report (or ``--rewrite``) and return the exit code."""
    for version in (options.from_version, options.to_version):
        _check_version(version)
    if any(item.split("=", 1)[0].strip() == PACKAGE for item in options.assume):
        raise UsageError(f"megaplug upgrade: --from and --to state {PACKAGE}'s version; "
                         f"leave it out of --assume")
    source_label, argv, settings = _launch(options, args)
    with _as_config_file(_chosen(options, settings)) as config:
        launch = [*config, *argv]
        old = _resolve(options, options.from_version, launch)
        new = _resolve(options, options.to_version, launch)
    flags = flag_changes(old.kernel, new.kernel, argv, settings)
    report = compare(old, new, flags, given=_given(old, settings))
    report["source"] = source_label
    if options.rewrite:
        if settings:
            raise UsageError("megaplug upgrade: --rewrite rewrites a command line; for a "
                             f"{source_label} give its flags after --")
        print(_shell_join(rewrite(old.kernel, new.kernel, argv)))
    elif options.format == "json":
        print(to_json(report))
    else:
        _print_text(report)
    return EXIT_INTERNAL if report["changes"] else EXIT_OK


def _check_version(version: str) -> None:
    """A version megaplug has no line for is a usage error naming the supported ones."""
    from ..environment._releases import line_of

    choice = line_of(version, "stated")
    if choice.problem:
        raise UsageError(f"megaplug upgrade: {choice.problem}")


# -- the launch ------------------------------------------------------------------------

def _launch(options: argparse.Namespace, args: list[str]
            ) -> tuple[str, list[str], dict[str, Any]]:
    """(what the launch is, in words; its training flags; its settings when SOURCE holds
    values rather than flags -- a checkpoint's or a saved resolve output's)."""
    config = [token for path in options.config for token in ("--config", path)]
    if options.source is None:
        if not args and not config:
            raise UsageError("megaplug upgrade: which launch? give its flags after -- "
                             "(megaplug upgrade --from 0.15.0 --to 0.19.2 -- --num-layers 24 "
                             "...), --config FILE, or a checkpoint directory")
        label = "command line" if not config else "command line with " + ", ".join(
            f"--config {path}" for path in options.config)
        return label, [*config, *args], {}
    if os.path.isdir(options.source) or _is_saved_values(options, options.source):
        side = _saved_side(options, options.source)
        values = {key: value for key, value in side.values.items() if not key.startswith("_")}
        return side.label, [*config, *args], values
    return (f"config file {options.source}", [*config, "--config", options.source, *args], {})


def _is_saved_values(options: argparse.Namespace, path: str) -> bool:
    from ..sources._config_files import ConfigFileError, load_config_file
    from ._diff import _is_resolve_output

    try:
        data = load_config_file(path)
    except ConfigFileError as exc:
        raise UsageError(f"megaplug upgrade: {exc}") from None
    return _is_resolve_output(_kernel(options, options.from_version), data)


def _saved_side(options: argparse.Namespace, path: str) -> Any:
    """A checkpoint's saved arguments or a saved resolve output, read as ``diff`` reads it."""
    from ._diff import load_side

    try:
        return load_side(_kernel(options, options.from_version), options, path, [])
    except UsageError as exc:
        raise UsageError(str(exc).replace("megaplug diff:", "megaplug upgrade:")) from None


def _chosen(options: argparse.Namespace, settings: dict[str, Any]) -> dict[str, Any]:
    """The saved settings the run chose: its flags (not derived values) at values other than
    the declared defaults of the release it ran on."""
    table = _kernel(options, options.from_version).table
    chosen = {}
    for dest, value in settings.items():
        spec = table.by_dest.get(dest, [None])[0]
        if spec is not None and spec.kind == "flag" and encode(spec.default) != value:
            chosen[dest] = value
    return chosen


class _as_config_file:
    """``["--config", PATH]`` of a temporary JSON file holding ``settings`` (none: ``[]``),
    removed afterwards."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings, self.directory = settings, None

    def __enter__(self) -> list[str]:
        if not self.settings:
            return []
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="megaplug-upgrade-")
        path = os.path.join(self.directory.name, "launch.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(to_json(self.settings))
        return ["--config", path]

    def __exit__(self, *exc: object) -> None:
        if self.directory is not None:
            self.directory.cleanup()


def _given(old: Side, settings: dict[str, Any]) -> set[str]:
    """The settings the launch itself sets (not defaults, not derived)."""
    given = {dest for dest, provenance in old.provenance.items()
             if provenance is not None and provenance.source in ("command-line", "config-file")}
    return given | set(settings)


# -- resolving under each release --------------------------------------------------------

def _target(options: argparse.Namespace, version: str) -> Any:
    from ._shared import target_from

    stated = argparse.Namespace(**vars(options))
    stated.assume = [*options.assume, f"{PACKAGE}={version}"]
    return target_from(stated)


def _kernel(options: argparse.Namespace, version: str) -> Any:
    from .._api import load
    from ._shared import plugin_controls

    return load(plugin_controls(options), environ=os.environ,
                target=_target(options, version))[0]


def _resolve(options: argparse.Namespace, version: str, argv: Sequence[str]) -> Side:
    """The launch through the Megatron facade with ``version`` targeted, as far as it gets."""
    import contextlib
    import io

    from ..megatron import ConfigError as FacadeError
    from ..megatron import parse_and_validate_args, resolution_warnings
    from ..megatron import provenance as provenance_of
    from ._shared import defaults_from, plugin_controls, preflight_wanted

    target = _target(options, version)
    kernel = _kernel(options, version)
    quiet = io.StringIO()  # the facade prints Megatron's warnings; they are reported here
    try:
        with contextlib.redirect_stderr(quiet):
            namespace = parse_and_validate_args(
                argv=[*plugin_controls(options), *argv], environ=os.environ,
                args_defaults=defaults_from(options), target=target, torch_types=False,
                register=False, preflight=preflight_wanted())
    except FacadeError as exc:
        partial = exc.partial
        # a draft still holds the settings the line lacks (rules read their defaults)
        withheld = getattr(kernel.table, "withheld", {})
        keys = [key for key in partial if key not in withheld] if partial is not None else []
        return Side(version, target.release_line(PACKAGE), kernel,
                    {key: encode(partial[key]) for key in keys},
                    {key: partial.source(key) for key in keys}, exc.problems,
                    getattr(exc, "warnings", ()))
    provenance = provenance_of(namespace)
    values = {key: encode(value) for key, value in vars(namespace).items() if key in provenance}
    return Side(version, target.release_line(PACKAGE), kernel, values,
                {key: provenance[key] for key in values}, (), resolution_warnings(namespace))


# -- what changes ----------------------------------------------------------------------

def _strip_passed_through(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(megaplug's own tokens -- ``-p``, ``--config`` and their values --, the flags)."""
    own: list[str] = []
    flags: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        name = token.split("=", 1)[0]
        if name in _PASSED_THROUGH:
            takes = _PASSED_THROUGH[name] and "=" not in token
            own += argv[index:index + 1 + takes]
            index += 1 + takes
            continue
        flags.append(token)
        index += 1
    return own, flags


def _occurrences(kernel: Any, argv: Sequence[str]) -> list[Any]:
    from ..sources._command_line import split

    return split(_strip_passed_through(argv)[1], kernel.table.by_option).occurrences


def replacement(old_spec: Any, new_table: Any) -> str | None:
    """The target's spelling of a setting whose flag it renamed: the same setting under
    another option string, taking a value the same way."""
    for spec in new_table.by_dest.get(old_spec.dest, ()):
        if spec.kind == "flag" and spec.option_strings and spec.action == old_spec.action:
            return spec.option_strings[0]
    return None


def flag_changes(old: Any, new: Any, argv: Sequence[str],
                 settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The flags (and saved settings) of this launch the target release removed or renamed."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for occurrence in _occurrences(old, argv):
        spelling, spec = occurrence.spelling, occurrence.spec
        if spelling in seen or spelling in new.table.by_option:
            continue
        seen.add(spelling)
        renamed = replacement(spec, new.table)
        found.append({"flag": spelling, "setting": spec.dest, "plugin": spec.plugin,
                      "change": "renamed" if renamed else "removed", "replacement": renamed})
    for dest in sorted(settings):
        spec = old.table.by_dest.get(dest, [None])[0]
        if spec is None or spec.kind != "flag" or dest in new.table.by_dest:
            continue
        if encode(spec.default) == settings[dest]:
            continue  # a saved value at its default: the launch did not choose it
        found.append({"flag": spec.primary, "setting": dest, "plugin": spec.plugin,
                      "change": "removed", "replacement": None})
    return found


def _kind(old: Any, new: Any) -> str:
    """How a value came to change: a declared default, a derivation, or otherwise."""
    sources = {getattr(old, "source", None), getattr(new, "source", None)}
    if sources == {"default"}:
        return "default"
    if sources & {"derived", "normalized"}:
        return "derived"
    return "value"


def _described(provenance: Any) -> str | None:
    return provenance.describe() if provenance is not None else None


def compare(old: Side, new: Side, flags: list[dict[str, Any]],
            given: set[str]) -> dict[str, Any]:
    """Everything that changes for the launch between the two sides, as data."""
    values: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    for dest in sorted(set(old.values) | set(new.values)):
        if dest.startswith("_"):
            continue
        before, after = old.provenance.get(dest), new.provenance.get(dest)
        if dest in old.values and dest in new.values:
            if old.values[dest] == new.values[dest]:
                continue
            values.append({
                "setting": dest, "plugin": new.kernel.table.owner(dest),
                "kind": _kind(before, after),
                "from": {"value": old.values[dest], "provenance": _described(before)},
                "to": {"value": new.values[dest], "provenance": _described(after)}})
        elif dest in old.values:
            removed.append({"setting": dest, "plugin": old.kernel.table.owner(dest),
                            "value": old.values[dest], "given": dest in given,
                            "provenance": _described(before)})
        else:
            added.append({"setting": dest, "plugin": new.kernel.table.owner(dest),
                          "value": new.values[dest], "provenance": _described(after)})
    old_messages = {problem.message for problem in old.problems}
    old_warnings = {warning.message for warning in old.warnings}
    # a removed flag is refused as unrecognized: it is reported once, with the flags
    gone = {flag["flag"] for flag in flags}
    rejected = [p.to_dict() for p in new.problems
                if p.message not in old_messages and not gone & set(p.flags)]
    warned = [w.to_dict() for w in new.warnings if w.message not in old_warnings]
    # settings that appear or disappear at their defaults change nothing this launch uses;
    # derived ones do (a release's own code reads them)
    moved = [entry for entry in removed + added if entry["provenance"] is None
             or not entry["provenance"].startswith("declared default")]
    changes = len(flags) + len(values) + len(rejected) + len(warned) + len(moved)
    return {"from": old.to_dict(), "to": new.to_dict(), "flags": flags, "values": values,
            "rejected": rejected, "new_warnings": warned, "removed_settings": removed,
            "new_settings": added, "changes": changes}


# -- the command line for the target release --------------------------------------------

def rewrite(old: Any, new: Any, argv: Sequence[str]) -> list[str]:
    """``argv`` for the target release: renamed flags under their new spelling, flags it
    removed left out, everything else (``-p``, ``--config``, values) as given."""
    own, _ = _strip_passed_through(argv)
    tokens = list(own)
    for occurrence in _occurrences(old, argv):
        spelling = occurrence.spelling
        if spelling not in new.table.by_option:
            spelling = replacement(occurrence.spec, new.table)
            if spelling is None:
                continue
        raw = occurrence.raw
        tokens.append(spelling)
        if isinstance(raw, list):
            tokens += raw
        elif raw is not None and occurrence.spec.takes_value:
            tokens.append(raw)
    return tokens


def _shell_join(tokens: Sequence[str]) -> str:
    import shlex

    return shlex.join(tokens)


# -- text ------------------------------------------------------------------------------

def _shown(value: Any) -> str:
    return to_json(value, indent=None)


def _in_force(side: dict[str, Any]) -> str:
    """``megatron_core 0.17.0``, or the measured release a version resolves as."""
    shown = f"{PACKAGE} {side['version']}"
    return shown if side["version"] == side["line"] else f"{shown} (as {side['line']})"


def _print_text(report: dict[str, Any]) -> None:
    old, new = report["from"], report["to"]
    print(f"from: {_in_force(old)}")
    print(f"to:   {_in_force(new)}")
    print(f"launch: {report['source']}")
    target = new["version"]
    if old["problems"]:
        print(f"\nthe launch is not valid under {old['version']} either:")
        for problem in old["problems"]:
            print(f"  - {_blamed(problem)}")
    _print_problems(report, target)
    _print_values(report)
    _print_presence(report["removed_settings"], f"settings {target} does not have",
                    old["version"])
    _print_presence(report["new_settings"], f"settings new in {target}", target)
    count = report["changes"]
    print(f"\n{count or 'nothing'} change{'s' if count != 1 else ''} for this launch "
          f"from {old['version']} to {target}")


def _print_problems(report: dict[str, Any], target: str) -> None:
    """Flags removed or renamed, problems the target reports, warnings it newly gives."""
    if report["flags"]:
        print(f"\nflags of this launch that {target} removed or renamed:")
        for flag in report["flags"]:
            if flag["change"] == "renamed":
                print(f"  {flag['flag']}: renamed to {flag['replacement']}")
            else:
                print(f"  {flag['flag']}: removed ([{flag['plugin']}] {flag['setting']})")
    if report["rejected"]:
        print(f"\nproblems {target}'s validation reports for this launch:")
        for problem in report["rejected"]:
            hint = f" (hint: {problem['hint']})" if problem["hint"] else ""
            print(f"  - {_blamed(problem)}{hint}")
    if report["new_warnings"]:
        print(f"\nwarnings {target} gives that {report['from']['version']} did not:")
        for warning in report["new_warnings"]:
            print(f"  - {_blamed(warning)}")


def _print_values(report: dict[str, Any]) -> None:
    """Values that change, by why: a declared default, a derivation, otherwise."""
    titles = {"default": "defaults that change", "derived": "derived values that change",
              "value": "values that change"}
    for kind, title in titles.items():
        entries = [entry for entry in report["values"] if entry["kind"] == kind]
        if not entries:
            continue
        print(f"\n{title}:")
        for entry in entries:
            print(f"  [{entry['plugin']}] {entry['setting']}: {_shown(entry['from']['value'])}"
                  f" -> {_shown(entry['to']['value'])}")
            if kind == "default":
                print(f"      {entry['to']['provenance']}")
            else:
                print(f"      from: {entry['from']['provenance']}")
                print(f"      to:   {entry['to']['provenance']}")


def _blamed(problem: dict[str, Any]) -> str:
    """A problem's message behind the plugin that reported it, as ``resolve`` prints it."""
    return f"[{problem['plugin']}] {problem['message']}" if problem["plugin"] else \
        problem["message"]


def _print_presence(entries: list[dict[str, Any]], title: str, where: str) -> None:
    listed = [e for e in entries if e["provenance"] is None
              or not e["provenance"].startswith("declared default")]
    at_default = len(entries) - len(listed)
    if not entries:
        return
    print(f"\n{title}:")
    for entry in listed:
        print(f"  [{entry['plugin']}] {entry['setting']} = {_shown(entry['value'])}"
              f"  ({entry['provenance']} in {where})")
    if at_default:
        print(f"  ... and {at_default} flag{'s' if at_default != 1 else ''} at "
              f"{'their' if at_default != 1 else 'its'} declared default (--format json "
              "lists them)")
