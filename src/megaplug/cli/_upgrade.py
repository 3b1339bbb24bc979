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
instead (of a saved source: the flags its run gave, :func:`replayed`), naming on stderr
what it cannot carry. Exit 1 when anything changes, 0 when nothing does, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys

from .._errors import Problem
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
    source_label, argv, saved = _launch(options, args)
    settings = replayed(options, saved, argv, source_label) if saved else {}
    with _as_config_file(settings, source_label) as config:
        launch = [*config, *argv]
        old = _resolve(options, options.from_version, launch)
        new = _resolve(options, options.to_version, launch)
    flags = flag_changes(old.kernel, new.kernel, argv, settings)
    report = compare(old, new, flags, given=_given(old, settings))
    if config:  # the replayed settings' file is gone: name the source they came from
        report = _relabelled(report, f"config file {config[1]}", source_label)
    report["source"] = source_label
    if options.rewrite:  # a saved source's given settings as the flags that give them
        written, unwritten = as_flags(old.kernel.table, settings)
        tokens, left = rewrite(old.kernel, new.kernel, [*argv, *written])
        left = [*unwritten, *left]
        print(_shell_join(tokens))
        for note in left:
            print(f"megaplug upgrade: {note}", file=sys.stderr)
    elif options.format == "json":
        print(to_json(report))
    else:
        _print_text(report)
    return EXIT_INTERNAL if report["changes"] else EXIT_OK


def _relabelled(data: Any, old: str, new: str) -> Any:
    """``data`` with the text ``old`` replaced by ``new`` in every string it holds."""
    if isinstance(data, str):
        return data.replace(old, new)
    if isinstance(data, list):
        return [_relabelled(item, old, new) for item in data]
    if isinstance(data, dict):
        return {key: _relabelled(value, old, new) for key, value in data.items()}
    return data


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


def replayed(options: argparse.Namespace, saved: dict[str, Any], argv: Sequence[str],
             label: str) -> dict[str, Any]:
    """The settings a saved source's run gave, as they were given: few of its flags that,
    resolved under the release it ran on, reproduce every saved flag value.

    A saved source holds resolved values: what the run gave, and what the release derived
    from it (``encoder_seq_length``, a dtype from ``bf16``, the weight-decay pair).
    Replaying a derived value as given invents problems (both given; a derived form no
    flag takes), so the launch is rebuilt from below: a pass gives the saved flags whose
    value differs from what the release makes of the launch so far and that no rule made
    (a rule makes its value from what is given, so it waits for that); when only values
    rules made still differ, the run gave those too. Then each setting given is left out
    again, the later-declared first (Megatron declares ``--seq-length`` before its
    alternative ``--encoder-seq-length``), where the launch reproduces the saved values
    without it and is no less valid."""
    table = _kernel(options, options.from_version).table
    flags = {dest: value for dest, value in saved.items()
             if (spec := _flag_spec(table, dest)) is not None}
    given: dict[str, Any] = {}
    while True:
        side = _replay(options, given, argv, label)
        differ = [dest for dest, value in flags.items()
                  if dest not in given and side.values.get(dest, _ABSENT) != value]
        if not differ:
            break
        made = {dest for dest in differ if _made_by_a_rule(side.provenance.get(dest))}
        for dest in [dest for dest in differ if dest not in made] or differ:
            given[dest] = flags[dest]
            spec = _flag_spec(table, dest)
            if isinstance(side.kernel.convert(spec, flags[dest], source="config-file"),
                          Problem) and spec.choices:
                given[dest] = _choice_made_into(options, given, argv, label, dest, spec,
                                                flags[dest])
    return _fewest(options, given, flags, argv, label, _mismatch(side, flags))


def _fewest(options: argparse.Namespace, given: dict[str, Any], flags: dict[str, Any],
            argv: Sequence[str], label: str, score: tuple[int, int]) -> dict[str, Any]:
    """``given`` without each setting, the later-declared first, that the launch
    reproduces the saved flags without, no less valid."""
    table = _kernel(options, options.from_version).table
    declared = {spec.dest: index for index, spec in enumerate(table)}
    for dest in sorted(given, key=lambda dest: -declared.get(dest, 0)):
        trial = {key: value for key, value in given.items() if key != dest}
        trial_score = _mismatch(_replay(options, trial, argv, label), flags)
        if trial_score <= score:
            given, score = trial, trial_score
    return given


def _mismatch(side: Side, flags: dict[str, Any]) -> tuple[int, int]:
    """How far a replay is from the saved source: (saved flag values it does not
    reproduce, problems it reports)."""
    return (sum(side.values.get(key, _ABSENT) != value for key, value in flags.items()),
            len(side.problems))


def _replay(options: argparse.Namespace, given: dict[str, Any], argv: Sequence[str],
            label: str) -> Side:
    """The launch with ``given`` as a config file's settings, under the source's release."""
    with _as_config_file(given, label) as config:
        return _resolve(options, options.from_version, [*config, *argv])


_ABSENT = object()


def _flag_spec(table: Any, dest: str) -> Any:
    spec = table.by_dest.get(dest, [None])[0]
    return spec if spec is not None and spec.kind == "flag" else None


def _made_by_a_rule(provenance: Any) -> bool:
    return provenance is not None and provenance.source in ("derived", "normalized")


def _choice_made_into(options: argparse.Namespace, given: dict[str, Any], argv: Sequence[str],
                      label: str, dest: str, spec: Any, value: Any) -> Any:
    """The choice of a flag that its plugin turns into the saved ``value``, a form no
    flag takes (``bf16`` for a dtype saved as ``torch.bfloat16``): each choice is tried
    under the release; none: the value as saved, for the conversion to name."""
    for choice in spec.choices:
        side = _replay(options, {**given, dest: encode(choice)}, argv, label)
        if side.values.get(dest, _ABSENT) == value:
            return encode(choice)
    return value


class _as_config_file:
    """``["--config", PATH]`` of a temporary JSON file holding ``settings`` (none: ``[]``),
    named after the source it replays, removed afterwards."""

    def __init__(self, settings: dict[str, Any], label: str = "launch") -> None:
        self.settings, self.directory = settings, None
        self.name = os.path.basename(label.rsplit(" ", 1)[-1].rstrip(")")) or "launch"

    def __enter__(self) -> list[str]:
        if not self.settings:
            return []
        import tempfile

        self.directory = tempfile.TemporaryDirectory(prefix="megaplug-upgrade-")
        path = os.path.join(self.directory.name, f"{self.name}.replayed.json")
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

def _passed_through(argv: Sequence[str]) -> tuple[set[int], list[str]]:
    """(the positions of megaplug's own tokens -- ``-p``, ``--config`` and their values --
    in ``argv``, the config files it names)."""
    own: set[int] = set()
    files: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        name, equals, value = token.partition("=")
        if name in _PASSED_THROUGH:
            takes = _PASSED_THROUGH[name] and not equals
            own.update(range(index, min(index + 1 + takes, len(argv))))
            if name == "--config":
                path = value if equals else (argv[index + 1] if index + 1 < len(argv) else None)
                files += [path] if path is not None else []
            index += 1 + takes
            continue
        index += 1
    return own, files


def _training_flags(argv: Sequence[str]) -> list[str]:
    own, _ = _passed_through(argv)
    return [token for index, token in enumerate(argv) if index not in own]


def _occurrences(kernel: Any, argv: Sequence[str]) -> list[Any]:
    from ..sources._command_line import split

    return split(_training_flags(argv), kernel.table.by_option).occurrences


def _config_keys(argv: Sequence[str]) -> list[tuple[str, str]]:
    """(config file, key) for every key of every ``--config`` file of the launch; a file
    that cannot be read is left to the resolve, which reports it."""
    from ..sources._config_files import ConfigFileError, load_config_file

    found = []
    for path in _passed_through(argv)[1]:
        try:
            found += [(path, str(key)) for key in load_config_file(path)]
        except ConfigFileError:
            continue
    return found


def replacement(old_spec: Any, new_table: Any) -> str | None:
    """The target's spelling of a setting whose flag it renamed: the same setting under
    another option string, taking a value the same way."""
    for spec in new_table.by_dest.get(old_spec.dest, ()):
        if spec.kind == "flag" and spec.option_strings and spec.action == old_spec.action:
            return spec.option_strings[0]
    return None


def flag_changes(old: Any, new: Any, argv: Sequence[str],
                 settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The flags of this launch the target release removed or renamed: on its command
    line, as keys of its config files, and among the settings a saved source gave."""
    found: list[dict[str, Any]] = []
    seen: set[str] = set()
    for occurrence in _occurrences(old, argv):
        spelling, spec = occurrence.spelling, occurrence.spec
        if spelling in seen or spelling in new.table.by_option:
            continue
        seen.add(spelling)
        found.append(_flag_change(spelling, spec, new, "command line"))
    for path, key in _config_keys(argv):
        spec = old.table.lookup(key)
        if spec is not None and spec.kind == "flag" and new.table.lookup(key) is None:
            found.append(_flag_change(key, spec, new, f"config file {path}"))
    for dest in sorted(settings):
        spec = _flag_spec(old.table, dest)
        if spec is not None and dest not in new.table.by_dest:
            found.append(_flag_change(spec.primary, spec, new, "the saved source"))
    return found


def _flag_change(spelling: str, spec: Any, new: Any, where: str) -> dict[str, Any]:
    renamed = replacement(spec, new.table)
    if renamed is not None and not spelling.startswith("-"):  # a config file's key
        renamed = new.table.by_option[renamed].dest
    return {"flag": spelling, "setting": spec.dest, "plugin": spec.plugin,
            "change": "renamed" if renamed else "removed", "replacement": renamed,
            "given_in": where}


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

def rewrite(old: Any, new: Any, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(``argv`` for the target release, what it could not carry, in words): renamed flags
    under their new spelling, flags it removed left out; every other token -- ``-p``,
    ``--config``, values, flags only the target has, tokens neither release knows -- as
    written (``--lr=-1`` stays one token). A config file's key the target removed or
    renamed cannot be rewritten here: it is named."""
    from ..sources._command_line import split

    own, _ = _passed_through(argv)
    positions = [index for index in range(len(argv)) if index not in own]
    flags = [argv[index] for index in positions]
    tokens = split(flags, {**new.table.by_option, **old.table.by_option})
    written: list[list[str]] = [[argv[index]] for index in range(len(argv))]
    left: list[str] = []
    for occurrence in tokens.occurrences:
        if occurrence.spelling in new.table.by_option:
            continue
        span = [positions[index] for index in range(occurrence.start, occurrence.end)]
        renamed = replacement(occurrence.spec, new.table)
        if renamed is not None:
            written[span[0]] = [renamed + argv[span[0]][len(occurrence.spelling):]]
            continue
        shown = " ".join(argv[index] for index in span)
        left.append(f"left out {shown}: the target release removed it "
                    f"([{occurrence.spec.plugin}] {occurrence.spec.dest})")
        for index in span:
            written[index] = []
    left += _unknown_kept(flags, tokens.unknown_at)
    for path, key in _config_keys(argv):
        spec = old.table.lookup(key)
        if spec is not None and new.table.lookup(key) is None:
            change = _flag_change(key, spec, new, path)
            left.append(f"config file {path} sets {key}, which the target release "
                        + (f"renamed to {change['replacement']}" if change["replacement"]
                           else "removed") + ": edit the file")
    return [token for tokens_at in written for token in tokens_at], left


def as_flags(table: Any, settings: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(the command line that gives ``settings`` -- a saved source's replayed flags, in
    JSON form -- in the order the flags are declared; what no flag can give, in words)."""
    tokens: list[str] = []
    left: list[str] = []
    for spec in (spec for spec in table if spec.dest in settings and spec.kind == "flag"):
        value, flag = settings[spec.dest], spec.primary
        if spec.action in ("store_true", "store_false", "store_const", "boolean_optional"):
            if spec.action == "boolean_optional" and value is False:
                flag = next((o for o in spec.option_strings if o.startswith("--no-")), None)
            elif spec.action != "boolean_optional" and value != encode(spec.const):
                flag = None
            tokens += [flag] if flag else []
            left += [] if flag else [f"no flag gives {spec.dest} = {_shown(value)}"]
        elif value is None or (spec.action == "count" and not isinstance(value, int)):
            left.append(f"no flag gives {spec.dest} = {_shown(value)}")
        elif spec.action == "count":
            tokens += [flag] * value
        else:
            items = value if isinstance(value, list) and (spec.nargs or spec.action ==
                                                          "append") else [value]
            texts = [_as_text(spec, item) for item in items]
            tokens += ([w for text in texts for w in (flag, text)] if spec.action == "append"
                       else [flag, *texts])
    return tokens, left


def _as_text(spec: Any, value: Any) -> str:
    """One value in JSON form as the command line writes it: a choice by its name."""
    from ..values._types import choice_name

    for choice in spec.choices or ():
        if encode(choice) == value:
            return choice_name(choice)
    if isinstance(value, str):
        return value
    from ..values._conversion import converted_item
    from ..values._loaded import _texts, same_json

    for text in [*(_texts(value)), str(value)]:  # the one the flag's parser reads back
        try:
            if same_json(encode(converted_item(spec, text)), value):
                return text
        except ValueError:
            continue
    return to_json(value, indent=None)


def _unknown_kept(flags: list[str], positions: list[int]) -> list[str]:
    """What ``rewrite`` says of the tokens neither release knows, kept as written: a flag
    with the values after it (the kernel reads them as its own), or a stray value."""
    from ..sources._command_line import NEGATIVE_NUMBER

    groups: list[list[str]] = []
    previous = None
    for index in positions:
        token = flags[index]
        is_flag = token.startswith("-") and not NEGATIVE_NUMBER.match(token)
        if groups and not is_flag and previous == index - 1 and groups[-1][0].startswith("-"):
            groups[-1].append(token)
        else:
            groups.append([token])
        previous = index
    return [f"kept {_shell_join(group)} as given: "
            + ("a flag neither release has" if group[0].startswith("-")
               and not NEGATIVE_NUMBER.match(group[0]) else "a value no flag takes")
            for group in groups]


def _shell_join(tokens: Sequence[str]) -> str:
    import shlex

    return shlex.join(tokens)


# -- text ------------------------------------------------------------------------------

def _shown(value: Any) -> str:
    return to_json(value, indent=None)


def _in_force(side: dict[str, Any]) -> str:
    """``megatron_core 0.17.0``, or the measured release a version resolves as and why, in
    the environment's words (``megatron_core 0.17.3 (as 0.17.1; 0.17.3 was not measured:
    resolved as 0.17.1, the nearest earlier measured release)``)."""
    from ..environment._releases import line_of

    shown = f"{PACKAGE} {side['version']}"
    if side["version"] == side["line"]:
        return shown
    why = line_of(side["version"], "stated").note
    return f"{shown} (as {side['line']}{f'; {why}' if why else ''})"


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
            where = "" if flag["given_in"] == "command line" else f" (in {flag['given_in']})"
            if flag["change"] == "renamed":
                print(f"  {flag['flag']}{where}: renamed to {flag['replacement']}")
            else:
                print(f"  {flag['flag']}{where}: removed ([{flag['plugin']}] "
                      f"{flag['setting']})")
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
