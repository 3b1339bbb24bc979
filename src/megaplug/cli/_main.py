"""``megaplug`` command line: list, flags, resolve, explain, diff, upgrade, schema, completion,
docs."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys

from .._errors import ConfigError, PluginError
from ..values._encoding import encode, to_json
from ._output import (
    OutputFailed,
    discard_stdout,
    guarded_streams,
    plugin_output_to_stderr,
    report_output_failure,
)
from ._parser import (
    COMMANDS,
    EXIT_FLUSH_FAILED,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_OUTPUT_FAILED,
    EXIT_PIPE_CLOSED,
    UsageError,
    build_parser,
)
from ._shared import (
    check_plugin_name,
    check_switches,
    config_tokens,
    defaults_from,
    involves,
    load_kernel,
    plugin_controls,
    preflight_wanted,
    print_problems,
    resolve_partially,
    suggest,
    target_from,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, NoReturn, Sequence

# -- entry -----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code.

    The cyclic garbage collector is off while a command runs: a command allocates tens of
    thousands of objects that live as long as it does, and the collector's passes over them
    found almost nothing to free (a few dozen cycles; docs/performance.md has the cost). As the
    process's own command (``argv`` not given: the ``megaplug`` script, ``python -m
    megaplug``) it stays off until the process ends, which then skips the collection at
    exit too; an in-process caller (``argv`` given) gets the collector back as it was.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if was_enabled and argv is not None:
            gc.enable()


def run() -> NoReturn:
    """The ``megaplug`` program (the console script, ``python -m megaplug``): :func:`main`
    on ``sys.argv``, then the process ends with its exit code.

    It ends the way the interpreter would -- ``atexit`` callbacks, standard streams
    flushed -- but without tearing the interpreter down: freeing every module, spec and
    provenance record one by one is a visible share of a resolve (docs/performance.md),
    paid by every rank of a launch for nothing. Where another thread is still running, the interpreter's own exit
    (which waits for it) is kept.
    """
    code = main()
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    os._exit(_flushed(code))


def _flushed(code: int) -> int:
    """``code``, once stdout and stderr are flushed; what the interpreter answers when
    flushing stdout fails: 120, or quietly the closed-pipe code if the reader left early.
    A stderr that cannot be written loses its messages, not the command's exit code."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BrokenPipeError:
            if stream is sys.stdout:
                code = EXIT_PIPE_CLOSED
        except (OSError, ValueError) as error:
            if stream is sys.stdout:
                report_output_failure(str(error))
                code = EXIT_FLUSH_FAILED
    return code


def _main(argv: Sequence[str] | None) -> int:
    """The command, its output guarded (``_output``): a failed write, a closed pipe and
    Ctrl-C each end it with their own exit code and no traceback."""
    with guarded_streams() as streams:
        try:
            code = _run(list(sys.argv[1:] if argv is None else argv))
        except BrokenPipeError:
            # the reader stopped early (`megaplug flags | head`): end quietly, and keep the
            # interpreter's final flush from failing again
            discard_stdout()
            return EXIT_PIPE_CLOSED
        except OutputFailed:
            code = EXIT_OUTPUT_FAILED
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED  # the caches' temporary files are already removed
        except SystemExit:  # argparse's --help, which ignores a failed write
            if streams.failure is None:
                raise
            code = EXIT_OUTPUT_FAILED
        if streams.failure is None:
            return code
        report_output_failure(streams.failure)
    discard_stdout()
    return EXIT_OUTPUT_FAILED


def _run(tokens: list[str]) -> int:
    own, passthrough = _split_passthrough(tokens)
    first = next((token for token in own if not token.startswith("-")), None)
    parser = build_parser(only=first if first in COMMANDS else None)
    try:
        check_switches()
        _check_command(own)
        setting = _take_setting(own, parser)
        options, unknown = parser.parse_known_args(own)
        if options.version:
            return _cmd_version(options)
        if options.command is None:
            raise UsageError("megaplug: a command is needed: " + ", ".join(COMMANDS)
                             + " (see megaplug --help)")
        if options.command == "explain":
            if setting is None:
                raise UsageError("megaplug explain: which setting? give DEST_OR_FLAG, e.g. "
                                 "megaplug explain ffn_hidden_size -- ARGS...")
            options.setting = setting
        if options.command == "flags" and options.word is None and len(unknown) == 1:
            options.word, unknown = unknown[0], []  # `megaplug flags --num-layers`
        if options.command not in ("resolve", "explain", "diff", "upgrade", "memory",
                                   "export", "plan") and unknown:
            raise UsageError(f"megaplug {options.command}: unrecognized arguments: "
                             + " ".join(unknown) + f" (see megaplug {options.command} --help)")
        if options.command in _SHOWS_A_LINE and not _line_reported(options):
            return EXIT_INVALID
        return _HANDLERS[options.command](options, [*unknown, *passthrough])
    except UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    except ConfigError as exc:
        print_problems(exc.problems)
        return EXIT_INVALID
    except PluginError as exc:
        print(f"megaplug: plugin error: {exc}", file=sys.stderr)
        return EXIT_INVALID


#: Commands that show the flags of the target's release line without resolving: a Megatron
#: version megaplug cannot target is a problem there (exit 2) as in a resolve, and one newer
#: than every line a warning; ``list`` shows both in its output (text and JSON) instead.
_SHOWS_A_LINE = ("flags", "schema", "completion", "docs")


def _line_reported(options: argparse.Namespace) -> bool:
    """Report what a resolve reports about the target's Megatron version (the one
    ``report_lines``); False when it is a problem, and the command shows nothing."""
    from .._errors import ProblemSink
    from ..environment._narrow import report_lines

    sink = ProblemSink()
    report_lines(target_from(options), sink)
    for warning in sink.warnings:
        print(f"megaplug: warning: {warning.message}", file=sys.stderr)
    if sink.problems:
        print_problems(sink.problems)
    return not sink.problems


def _split_passthrough(tokens: list[str]) -> tuple[list[str], list[str]]:
    if "--" in tokens:
        index = tokens.index("--")
        return tokens[:index], tokens[index + 1:]
    return tokens, []


def _check_command(own: list[str]) -> None:
    """A mistyped command gets a suggestion rather than argparse's list of choices."""
    first = next((t for t in own if not t.startswith("-")), None)
    if first is None or first in COMMANDS:
        return
    suggestion = suggest(first, COMMANDS)
    hint = f" (did you mean {suggestion}?)" if suggestion else ""
    raise UsageError(f"megaplug: unknown command {first!r}{hint}; the commands are "
                     + ", ".join(COMMANDS))


def _take_setting(own: list[str], parser: argparse.ArgumentParser) -> str | None:
    """Take explain's DEST_OR_FLAG out of ``own`` (it may look like an option).

    It is the first token after ``explain`` that is neither one of explain's own options
    nor such an option's value, so ``megaplug explain --config c.yaml lr`` works too.
    """
    if own[:1] != ["explain"]:
        return None
    explain = _subparser(parser, "explain")
    takes_value = {option: action.nargs != 0 for action in explain._actions
                   for option in action.option_strings}
    index = 1
    while index < len(own):
        token = own[index]
        if token in ("-h", "--help"):
            return None
        name = token.split("=", 1)[0]
        if name in takes_value:
            index += 2 if takes_value[name] and "=" not in token else 1
            continue
        return own.pop(index)
    return None


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._subparsers._group_actions:  # type: ignore[union-attr]
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise KeyError(name)


# -- list / --version ------------------------------------------------------------------

def _cmd_list(options: argparse.Namespace, _: list[str]) -> int:
    listing = _listing(options)
    rows, problems = listing["rows"], listing["problems"]
    if options.order:
        position = {name: index for index, name in enumerate(listing["order"])}
        rows = sorted(rows, key=lambda r: (r["name"] not in position,
                                           position.get(r["name"], 0), r["name"]))
    else:
        rows = sorted(rows, key=lambda r: r["name"])
    if options.json:  # a list of plugins, each saying the line its flags are counted at
        target = target_from(options).line_choice().to_dict()
        print(to_json([{**row, "target_megatron": target} for row in rows], indent=2))
    else:
        _print_plugin_table(rows)
        print(f"target Megatron: {target_line(options)}")
        choice = target_from(options).line_choice()
        for message, kind in ((choice.problem, "problem"), (choice.warning, "warning")):
            if message:
                print(f"{kind}: {message}")
        for problem in problems:
            print(f"problem: {problem}")
    for row in rows:
        warning = _entry_point_warning(row)
        if warning:
            print(f"megaplug: warning: {warning}", file=sys.stderr)
    return EXIT_OK


def _print_plugin_table(rows: list[dict[str, Any]]) -> None:
    table = [("PLUGIN", "STATUS", "VERSION", "DISTRIBUTION", "FLAGS", "HOOKS", "ORDERING")]
    for row in rows:
        ordering = [f"after={','.join(row['after'])}"] if row["after"] else []
        ordering += [f"before={','.join(row['before'])}"] if row["before"] else []
        table.append((row["name"], row["status"], row["version"] or "-",
                      row["distribution"] or row["source"],
                      str(row["declared_flags"]), ",".join(row["hooks"]) or "-",
                      " ".join(ordering) or "-"))
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]) - 1)]
    name_width = widths[0]
    for line, row in zip(table, [None, *rows]):
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[-1])
        if row is not None and row["reason"] and row["status"] != "active":
            print(f"{'':<{name_width}}  -> {row['reason']}")


def _entry_point_warning(row: dict[str, Any]) -> str | None:
    """A plugin whose own name is not its entry point's name is blocked by two names."""
    entry_point = row.get("entry_point")
    if not entry_point:
        return None
    entry_name = entry_point.split("=", 1)[0].strip()
    if entry_name == row["name"]:
        return None
    return (f"plugin {row['name']!r} is installed under the entry point name {entry_name!r} "
            f"({entry_point}, distribution {row['distribution'] or '?'}): -p no:{row['name']} "
            f"still imports it before blocking it; the entry point should be named "
            f"{row['name']!r}")


def _listing(options: argparse.Namespace) -> dict[str, Any]:
    from ..cache._store import cached

    return cached("list", _list_fingerprint(options), lambda: _list_rows(options),
                  shape=_LISTING_SHAPE, track_imports=True, per_key=True)


#: What a cached listing must hold to be used; a tampered or foreign file is recomputed.
_LISTING_SHAPE = {
    "rows": [{"name": str, "status": str, "source": str, "reason": str, "version": (str, None),
              "distribution": (str, None), "entry_point": (str, None), "hooks": [str],
              "after": [str], "before": [str], "flags": int, "declared_flags": int}],
    "order": [str], "problems": [str]}


def _list_rows(options: argparse.Namespace) -> dict[str, Any]:
    try:
        kernel, _rest = load_kernel(options)
    except PluginError:
        kernel, _rest = load_kernel(options, tolerant=True)
    _depends_on_kernel(kernel)
    counts: dict[str, int] = {}
    for spec in kernel.table:
        if spec.kind == "flag":
            counts[spec.plugin] = counts.get(spec.plugin, 0) + 1
    inactive_counts = {name: sum(1 for s in specs if s.kind == "flag")
                       for name, specs in kernel.inactive_specs.items()}
    rows = []
    for record in sorted(kernel.plugins.records.values(), key=lambda r: r.name):
        row = record.to_dict()
        row["flags"] = counts.get(record.name, 0)
        row["declared_flags"] = counts.get(record.name, 0) or inactive_counts.get(record.name, 0)
        rows.append(row)
    return {"rows": rows, "order": list(kernel.plugins.order),
            "problems": [str(p) for p in kernel.setup_problems]}


def _depends_on_kernel(kernel: Any) -> None:
    """Key the answer being computed on the kernel's code: the options modules of a table
    read back, and the plugins' packages (already imported when the kernel was loaded
    earlier in this process)."""
    from ..cache._flag_table import code_packages
    from ..cache._store import depends_on, depends_on_packages

    depends_on(kernel.sources)
    depends_on_packages(code_packages(kernel.plugins.records.values()))


def target_line(options: argparse.Namespace) -> str:
    """The Megatron release line a command targets and where it came from, in words."""
    return str(target_from(options).release_source()) if hasattr(options, "assume") else ""


def _list_fingerprint(options: argparse.Namespace, *view: str) -> str:
    """What ``megaplug list`` (or a ``view`` of the plugins' code: a command and its
    arguments) depends on, known before computing it: the selection and the installed
    distributions (the cache adds the files of every module it imported)."""
    from ..cache._store import code_fingerprint
    from ..sources._selection import PluginSelection
    selection = PluginSelection.from_environment()
    selection.take_from_argv(plugin_controls(options))
    return code_fingerprint(["3", *view, target_line(options), repr(sorted(selection.load)),
                             repr(sorted(selection.block)), str(selection.autoload),
                             repr(selection.problems)])


def _plugin_view(options: argparse.Namespace, kind: str, make: Callable[[Any], Any],
                 shape: Any, *key: str, accept: Callable[[Any], bool] | None = None,
                 ) -> dict[str, Any]:
    """``{"plugins": {name: [status, reason]}, "value": make(kernel)}``, cached like
    ``list`` (the selection, the distributions, the files of every module and cached
    answer it was computed from): ``flags``, ``schema``, ``completion`` and ``docs``
    depend on nothing else, so a process that finds it imports no plugin at all.
    ``accept`` refuses a stored value (then it is computed again)."""
    from ..cache._store import cached

    def compute() -> dict[str, Any]:
        kernel, _rest = load_kernel(options)
        _depends_on_kernel(kernel)
        return {"plugins": {name: [str(record.status), record.reason]
                            for name, record in kernel.plugins.records.items()},
                "selection": [list(pair) for pair in kernel.plugins.selection_problems],
                "value": make(kernel)}

    view = cached(kind, _list_fingerprint(options, kind, *key), compute,
                  shape={"plugins": dict, "selection": [[str]], "value": shape},
                  track_imports=True, per_key=True,
                  accept=lambda stored: accept is None or accept(stored["value"]))
    if view["selection"]:  # `-p no:TYPO` is refused here as resolve refuses it
        from .._errors import Problem

        raise ConfigError([Problem(message, hint=hint) for message, hint in view["selection"]])
    return view


def _cmd_version(options: argparse.Namespace) -> int:
    import platform

    from .._version import __version__

    print(f"megaplug {__version__} (Python {platform.python_version()}, "
          f"{os.path.dirname(os.path.dirname(__file__))})")
    rows = sorted(_listing(options)["rows"], key=lambda r: r["name"])
    width = max((len(r["name"]) for r in rows), default=0)
    origin_width = max((len(r["distribution"] or r["source"]) for r in rows), default=0)
    for row in rows:
        status = row["status"] if row["status"] == "active" else (
            f"{row['status']}: {row['reason']}" if row["reason"] else row["status"])
        print(f"  {row['name']:<{width}}  {row['version'] or '-':<8}  "
              f"{row['distribution'] or row['source']:<{origin_width}}  ({status})")
    return EXIT_OK


# -- flags -----------------------------------------------------------------------------

#: Actions as argparse spells them in ``add_argument`` (the ``flags --json`` contract).
ACTION_NAMES = {"boolean_optional": "BooleanOptionalAction"}


def flag_rows(kernel: Any, plugin: str | None = None,
              inactive: bool = True) -> list[dict[str, Any]]:
    """Every flag spec as a JSON-ready row (``flags``, ``docs``); with ``inactive``, also the
    flags an unavailable plugin would add, with that plugin's status."""
    status = {name: record.status for name, record in kernel.plugins.records.items()}
    specs = list(kernel.table)
    if inactive:
        specs += [spec for name, found in sorted(kernel.inactive_specs.items())
                  if status.get(name) == "unavailable" for spec in found]
    rows = []
    for spec in specs:
        if plugin and spec.plugin != plugin:
            continue
        rows.append({
            "plugin": spec.plugin,
            "status": status.get(spec.plugin, "active"),
            "kind": spec.kind,
            "option_strings": list(spec.option_strings),
            "dest": spec.dest,
            "action": ACTION_NAMES.get(spec.action, spec.action) if spec.kind == "flag"
            else None,
            "type": spec.type_name,
            "default": encode(spec.default),
            "choices": encode(list(spec.choices)) if spec.choices is not None else None,
            "nargs": spec.nargs,
            "hidden": spec.hidden,
            "deprecated": spec.deprecated,
            "deprecated_spellings": list(spec.deprecated_spellings),
            "env": spec.env,
            "help": spec.help,
        })
    return rows


def _matches(row: dict[str, Any], word: str) -> bool:
    word = word.lower()
    return any(word in text.lower() for text in
               [*row["option_strings"], row["dest"], row["help"] or "", row["env"] or ""])


def _cmd_flags(options: argparse.Namespace, _: list[str]) -> int:
    view = _plugin_view(options, "flags", flag_rows, [dict])
    check_plugin_name(view["plugins"], options.plugin, "flags")
    every_row = view["value"]
    rows = [row for row in every_row if not options.plugin or row["plugin"] == options.plugin]
    if options.word:
        rows = [row for row in rows if _matches(row, options.word)]
    if options.json:
        print(to_json(rows, indent=2))
        return EXIT_OK
    shown = [row for row in rows if row["kind"] == "flag"]
    for row in shown:
        print(_flag_line(row))
        if row["help"]:
            print(f"      {row['help']}")
    if options.word and not shown:
        spellings = [o for row in every_row for o in row["option_strings"]]
        near = suggest(options.word, spellings) or suggest("--" + options.word, spellings)
        print(f"megaplug flags: no flag mentions {options.word!r}"
              + (f" (did you mean {near}?)" if near else ""), file=sys.stderr)
    return EXIT_OK


def _flag_line(row: dict[str, Any]) -> str:
    detail = row["action"]
    if row["type"]:
        detail += f" {row['type']}"
    if row["nargs"] is not None:
        detail += f" nargs={row['nargs']}"
    detail += f" default={to_json(row['default'], indent=None)}"
    if row["choices"] is not None:
        detail += f" choices={','.join(map(str, row['choices']))}"
    line = f"[{row['plugin']}] {', '.join(row['option_strings'])} -> {row['dest']}  ({detail})"
    if row["deprecated"]:
        line += f"  deprecated: {row['deprecated']}"
    if row["status"] != "active":
        line += f"  [plugin {row['status']}]"
    return line


def _cmd_resolve(options: argparse.Namespace, args: list[str]) -> int:
    from ..megatron import parse_and_validate_args
    from ..megatron import provenance as provenance_of

    target = target_from(options)
    with plugin_output_to_stderr():  # the answer on stdout is the JSON below, and only it
        namespace = parse_and_validate_args(
            argv=[*plugin_controls(options), *config_tokens(options), *args],
            environ=os.environ, args_defaults=defaults_from(options), target=target,
            torch_types=False, register=False, preflight=preflight_wanted())
    provenance = provenance_of(namespace)
    values = {k: encode(v) for k, v in vars(namespace).items()}
    if options.provenance:
        values = {k: provenance[k].to_dict() for k in sorted(values) if k in provenance}
    elif options.given:
        from .._config import Resolved

        given = Resolved({}, provenance, None, [], []).given_values()  # type: ignore[arg-type]
        # the facade's private markers (_is_global_batch_size_...) are not settings
        values = {k: encode(v) for k, v in given.items()
                  if k not in ("rank", "world_size") and not k.startswith("_")}
    if options.format == "yaml":
        from ..sources._files import to_yaml

        sys.stdout.write(to_yaml(values))
    else:
        sys.stdout.write(to_json(values, sort_keys=True) + "\n")
    return EXIT_OK


def _cmd_explain(options: argparse.Namespace, args: list[str]) -> int:
    kernel, rest = load_kernel(options, args)
    spec = kernel.table.lookup(options.setting)
    if spec is None:
        record = kernel.inactive_flags.get(options.setting)
        if record is not None:
            print(f"megaplug explain: {options.setting} belongs to plugin {record.name!r}, "
                  f"which is {record.status}: {record.reason}", file=sys.stderr)
            return EXIT_INVALID
        if _in_other_releases(kernel, options):
            return EXIT_INVALID
        suggestion = kernel.table.suggest(options.setting, list(kernel.table.by_option)
                                          + list(kernel.table.by_dest))
        hint = (f"did you mean {suggestion}?" if suggestion
                else "megaplug flags WORD finds settings")
        print(f"megaplug explain: no setting {options.setting!r} ({hint})", file=sys.stderr)
        return EXIT_INVALID
    _print_spec(kernel, spec)
    print(f"megatron:  {target_line(options)}")
    config, error = resolve_partially(options, args)
    if spec.dest not in config:
        print(f"value:     (removed: {spec.dest} is retired during resolution)")
    else:
        note = "  (as far as resolution got: the configuration is invalid)" if error else ""
        print(f"value:     {to_json(encode(config[spec.dest]), indent=None)}{note}")
        print("provenance:")
        for step in config.source(spec.dest).history():
            print(f"  - {step.describe()}")
    if error is None:
        return EXIT_OK
    mine = [p for p in error.problems if involves(kernel, p, spec.dest)]
    others = len(error.problems) - len(mine)
    print(f"problems involving {spec.dest}:" + ("" if mine else " none"))
    for problem in mine:
        print(f"  - {problem}")
    if others:
        print(f"({others} other problem{'s' if others != 1 else ''} in the configuration: "
              "listed on stderr)")
    print_problems(error.problems)
    return EXIT_INVALID


def _in_other_releases(kernel: Any, options: argparse.Namespace) -> bool:
    """Say so (on stderr) when only other Megatron releases have the setting explained."""
    setting = options.setting
    withheld = kernel.table.withheld.get(setting.lstrip("-").replace("-", "_"))
    where = kernel.table.elsewhere.get(withheld[0].primary if withheld else "--" + (
        setting.lstrip("-").replace("_", "-")))
    if where:
        print(f"megaplug explain: {setting} exists only in {where}, not in the target's "
              f"release ({target_line(options)})", file=sys.stderr)
    return bool(where)


def _print_spec(kernel: Any, spec: Any) -> None:
    specs = kernel.table.by_dest[spec.dest]
    print(f"setting:   {spec.dest}")
    print(f"plugin:    {spec.plugin}")
    spellings = [o for s in specs for o in s.option_strings]
    if spellings:
        print(f"flags:     {', '.join(spellings)}")
    if spec.env:
        print(f"env:       {spec.env}")
    action = ACTION_NAMES.get(spec.action, spec.action)
    print(f"kind:      {spec.kind}" + (f" ({action})" if spec.kind == "flag" else ""))
    print(f"type:      {spec.type_name or '-'}" + (f", nargs={spec.nargs}" if spec.nargs else ""))
    print(f"default:   {to_json(encode(spec.default), indent=None)}")
    if spec.choices is not None:
        print(f"choices:   {', '.join(str(encode(c)) for c in spec.choices)}")
    if spec.deprecated:
        print(f"deprecated: {spec.deprecated}")
    if spec.help:
        print(f"help:      {spec.help}")


# -- diff / schema / completion / docs -------------------------------------------------

def _cmd_diff(options: argparse.Namespace, args: list[str]) -> int:
    from ._diff import run_diff

    return run_diff(options, args)


def _cmd_upgrade(options: argparse.Namespace, args: list[str]) -> int:
    from ._upgrade import run_upgrade

    return run_upgrade(options, args)


def _cmd_memory(options: argparse.Namespace, args: list[str]) -> int:
    from ._memory import run_memory

    return run_memory(options, args)


def _cmd_export(options: argparse.Namespace, args: list[str]) -> int:
    from ._interop import run_export

    return run_export(options, args)


def _cmd_import(options: argparse.Namespace, args: list[str]) -> int:
    from ._interop import run_import

    return run_import(options, args)


def _cmd_plan(options: argparse.Namespace, args: list[str]) -> int:
    from ._plan import run_plan

    return run_plan(options, args)


def _cmd_schema(options: argparse.Namespace, _: list[str]) -> int:
    def schema(kernel: Any) -> dict[str, Any] | None:
        from ._schema import config_schema

        plugin = kernel.plugins.records.get(options.plugin)
        if options.plugin and (plugin is None or plugin.status in ("blocked", "broken")):
            return None  # refused below, by check_plugin_name
        return config_schema(kernel, options.plugin)

    view = _plugin_view(options, "schema", schema, (dict, None), str(options.plugin))
    check_plugin_name(view["plugins"], options.plugin, "schema")
    print(to_json(view["value"]))
    return EXIT_OK


def _cmd_completion(options: argparse.Namespace, _: list[str]) -> int:
    def script(kernel: Any) -> str:
        from ._completion import completion_script

        return completion_script(kernel, options.shell)

    sys.stdout.write(_plugin_view(options, "completion", script, str, options.shell)["value"])
    return EXIT_OK


def _cmd_docs(options: argparse.Namespace, _: list[str]) -> int:
    command = _docs_command(options)

    def pages(kernel: Any) -> list[list[str]]:
        from ._docs import reference_pages

        return [[name, text] for name, text in reference_pages(kernel, command).items()]

    def safe(pages: list[list[str]]) -> bool:  # a tampered file writes nowhere else
        return all(len(page) == 2 and _is_page_name(page[0]) for page in pages)

    from ._docs import write_pages

    # the index names the command, --out included: it is part of the answer's key
    written = sorted(_plugin_view(options, "docs", pages, [[str]], command,
                                  accept=safe)["value"])
    write_pages(options.out, dict(written))
    directory = os.path.abspath(options.out)
    print(f"wrote {len(written)} files to {directory}: "
          + ", ".join(name for name, _text in written))
    return EXIT_OK


def _docs_command(options: argparse.Namespace) -> str:
    """The command that regenerates this reference (its index names it); with
    ``--shipped``, the plugins no shipped distribution provides are blocked first."""
    import shlex

    if options.shipped:
        from ..cache._entry_points import entry_points
        from ..sources._selection import SHIPPED_DISTRIBUTIONS

        options.plugin_controls = [*options.plugin_controls, *(
            f"no:{entry.name}" for entry in entry_points()
            if entry.distribution not in SHIPPED_DISTRIBUTIONS)]
    words = ["megaplug", "docs", *(["--shipped"] if options.shipped else []),
             *(word for item in options.assume for word in ("--assume", item)),
             "--out", options.out]
    # a page is UTF-8 text: a path's bytes that are not (caf\xe9) are shown replaced
    return shlex.join(words).encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _is_page_name(name: str) -> bool:
    return (name.endswith(".md") and os.path.basename(name) == name
            and not name.startswith(".") and os.sep not in name and "/" not in name)


_HANDLERS: dict[str, Callable[[argparse.Namespace, list[str]], int]] = {
    "list": _cmd_list, "flags": _cmd_flags, "resolve": _cmd_resolve, "explain": _cmd_explain,
    "diff": _cmd_diff, "upgrade": _cmd_upgrade, "memory": _cmd_memory, "plan": _cmd_plan,
    "export": _cmd_export, "import": _cmd_import, "schema": _cmd_schema,
    "completion": _cmd_completion, "docs": _cmd_docs,
}


if __name__ == "__main__":  # pragma: no cover
    run()
