"""``megaplug`` command line: list, flags, resolve, explain, diff, schema, completion, docs.

Exit codes: 0 success; 2 an invalid configuration or usage (every problem on stderr);
1 an internal failure, or ``diff --exit-code`` finding differences; 141 when the reader of
stdout went away (``megaplug flags | head``), as a tool stopped by SIGPIPE reports.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Sequence

from ._errors import ConfigError, PluginError, Problem
from ._values import encode, to_json, to_yaml

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2
EXIT_PIPE_CLOSED = 128 + 13  # 128 + SIGPIPE, what the shell reports for `yes | head`

COMMANDS = ("list", "flags", "resolve", "explain", "diff", "schema", "completion", "docs")

_TRAINING_FLAGS_EPILOG = """\
ARGS are the training flags, after `--`, exactly as a training script takes them:
  megaplug {command} -- --num-layers 2 --hidden-size 64 --num-attention-heads 4 ...
Find them with `megaplug flags WORD` or `megaplug flags --plugin NAME`; `-p NAME`,
`-p no:NAME` and `--config FILE` work among ARGS too. `megaplug resolve -- --help` prints
them argparse-style, grouped by plugin."""


class UsageError(Exception):
    """A command line megaplug cannot act on; printed as it is, exit 2."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def build_parser(completing: bool = False, only: str | None = None) -> argparse.ArgumentParser:
    """The parser of megaplug's own options; training flags are not in it (they follow ``--``).

    ``completing`` leaves out diff's positionals: the completion script completes them,
    with the training flags, as one list of words. ``only`` builds that command's options
    alone (the one being run: building all of them is a noticeable part of a resolve).
    """
    parser = _ArgumentParser(
        prog="megaplug",
        description="Inspect megaplug plugins and flags, and resolve training configurations.",
        epilog="Training flags follow `--`: megaplug resolve -- --num-layers 2 ... "
               "Find them with `megaplug flags WORD`. Shell completion: `megaplug completion "
               "bash|zsh|fish`.",
    )
    parser.add_argument("--version", action="store_true",
                        help="print megaplug's version and the plugins' (as megaplug list does)")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    adders: dict[str, Callable[[Any], None]] = {
        "list": _add_list, "flags": _add_flags, "resolve": _add_resolve,
        "explain": _add_explain, "diff": lambda c: _add_diff(c, with_sides=not completing),
        "schema": _add_schema, "completion": _add_completion, "docs": _add_docs}
    for name, add in adders.items():
        if only is None or name == only:
            add(commands)
    return parser


def _command(commands: Any, name: str, help: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand whose description is its help line."""
    return commands.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                               formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)


def _add_list(commands: Any) -> None:
    """``megaplug list``."""
    listing = _command(commands, "list",
                       "every plugin: status (and why), version, flags, hooks, ordering")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--order", action="store_true",
                         help="list in the order the plugins' hooks run (default: by name)")
    _plugin_options(listing)


def _add_flags(commands: Any) -> None:
    """``megaplug flags``."""
    flags = _command(commands, "flags",
                     "every flag with its help line; filter by plugin or a word")
    flags.add_argument("word", nargs="?", metavar="WORD",
                       help="only flags whose spelling, setting name or help mentions WORD")
    flags.add_argument("--plugin", metavar="NAME", help="only this plugin's flags")
    flags.add_argument("--json", action="store_true", help="print JSON")
    _plugin_options(flags)


def _add_resolve(commands: Any) -> None:
    """``megaplug resolve``."""
    resolve = _command(commands, "resolve",
                       "resolve ARGS and print every value",
                       usage="megaplug resolve [options] [--] ARGS...",
                       epilog=_TRAINING_FLAGS_EPILOG.format(command="resolve"))
    _resolve_options(resolve)
    resolve.add_argument("--format", choices=("json", "yaml"), default="json",
                         help="output format (default: json)")
    shown = resolve.add_mutually_exclusive_group()
    shown.add_argument("--provenance", action="store_true",
                       help="print where each value came from instead of the values")
    shown.add_argument("--given", action="store_true",
                       help="print only the settings as given (a config file that reproduces "
                            "this resolve with --config)")
    _plugin_options(resolve)


def _add_explain(commands: Any) -> None:
    """``megaplug explain``."""
    explain = _command(commands, "explain",
                       "one setting: owner, type, value, provenance and its problems",
                       usage="megaplug explain DEST_OR_FLAG [options] [--] ARGS...",
                       epilog="DEST_OR_FLAG is a setting (ffn_hidden_size) or one of its flags "
                              "(--ffn-hidden-size).\n"
                              + _TRAINING_FLAGS_EPILOG.format(command="explain ffn_hidden_size"))
    _resolve_options(explain)
    _plugin_options(explain)


def _add_diff(commands: Any, with_sides: bool) -> None:
    """``megaplug diff``; ``with_sides`` adds its positionals."""
    diff = _command(commands, "diff",
                    "the settings whose resolved values differ between two runs",
                    usage="megaplug diff A [B] [options] [--] [ARGS...]",
                    epilog="A and B are each a config file, a saved `megaplug resolve` output "
                           "(JSON or YAML) or a\ncheckpoint directory (its saved arguments). "
                           "With A and B, ARGS are resolved on top of each config\nfile; with "
                           "A alone, the other side is ARGS: `megaplug diff CHECKPOINT_DIR -- "
                           "--num-layers 24 ...`\nshows what this command line changes against "
                           "the checkpoint it resumes from.")
    if with_sides:
        diff.add_argument("sides", nargs="+", metavar="A [B]", help="what to compare")
    diff.add_argument("--json", action="store_true", help="print JSON")
    diff.add_argument("--exit-code", action="store_true",
                      help="exit 1 when something differs (like git diff --exit-code)")
    _resolve_options(diff, config=False)
    _plugin_options(diff)


def _add_schema(commands: Any) -> None:
    """``megaplug schema``."""
    schema = _command(commands, "schema",
                      "a JSON Schema (draft 2020-12) of config files, for editors",
                      epilog="VS Code (YAML extension) and other editors complete and check a "
                             "config file that starts with\n  # yaml-language-server: "
                             "$schema=megaplug.schema.json\nafter `megaplug schema > "
                             "megaplug.schema.json`.")
    schema.add_argument("--plugin", metavar="NAME",
                        help="only this plugin's settings (for a file that holds only those)")
    _plugin_options(schema)


def _add_completion(commands: Any) -> None:
    """``megaplug completion``."""
    completion = _command(commands, "completion",
                          "print a shell completion script",
                          epilog="bash: eval \"$(megaplug completion bash)\" (in ~/.bashrc)\n"
                                 "zsh:  eval \"$(megaplug completion zsh)\" (in ~/.zshrc, after "
                                 "compinit)\nfish: megaplug completion fish > "
                                 "~/.config/fish/completions/megaplug.fish\n"
                                 "The script carries the flags of the plugins installed now; "
                                 "generate it again after installing one.")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    _plugin_options(completion)


def _add_docs(commands: Any) -> None:
    """``megaplug docs``."""
    docs = _command(commands, "docs",
                    "write the per-plugin flag reference (Markdown)")
    docs.add_argument("--out", default="docs/flags", metavar="DIR",
                      help="output directory (default: docs/flags, under the current directory)")
    _plugin_options(docs)


def _plugin_options(sub: argparse.ArgumentParser) -> None:
    group = sub.add_argument_group("plugin selection")
    group.add_argument("-p", dest="plugin_controls", action="append", default=[],
                       metavar="NAME", help="load plugin NAME (an entry point or module); "
                                            "-p no:NAME blocks it (repeatable)")
    group.add_argument("--no-autoload", action="store_true",
                       help="do not load plugins from installed entry points")


def _resolve_options(sub: argparse.ArgumentParser, config: bool = True) -> None:
    if config:
        sub.add_argument("--config", action="append", default=[], metavar="FILE",
                         help="YAML or JSON file of settings (repeatable; later files win)")
    sub.add_argument("--defaults", metavar="JSON",
                     help="caller defaults as a JSON object (or @file), like args_defaults")
    sub.add_argument("--assume", action="append", default=[], metavar="NAME=VERSION",
                     help="assume package NAME is installed at VERSION on the target "
                          "(NAME=none: not installed)")
    sub.add_argument("--assume-device-capability", metavar="MAJOR.MINOR",
                     help="assume the target GPU's compute capability ('none': no GPU)")


# -- entry -----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    try:
        return _run(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        # the reader stopped early (`megaplug flags | head`): end quietly, and keep the
        # interpreter's final flush from failing again
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_PIPE_CLOSED


def _run(tokens: list[str]) -> int:
    own, passthrough = _split_passthrough(tokens)
    first = next((token for token in own if not token.startswith("-")), None)
    parser = build_parser(only=first if first in COMMANDS else None)
    try:
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
        if options.command not in ("resolve", "explain", "diff") and unknown:
            raise UsageError(f"megaplug {options.command}: unrecognized arguments: "
                             + " ".join(unknown) + f" (see megaplug {options.command} --help)")
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


def suggest(word: str, candidates: Sequence[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``word``, if any is close enough."""
    import difflib

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return matches[0] if matches else None


def print_problems(problems: Sequence[Problem]) -> None:
    """Every problem on stderr, under a count (a bounded report: see ``report_lines``)."""
    from ._errors import report_lines

    print("megaplug: " + "\n".join(report_lines(problems)), file=sys.stderr)


def _plugin_controls(options: argparse.Namespace) -> list[str]:
    """The command's ``-p`` / ``--no-autoload`` options, as argv tokens for the kernel."""
    controls: list[str] = []
    for name in getattr(options, "plugin_controls", []):
        controls += ["-p", name]
    if getattr(options, "no_autoload", False):
        controls.append("--no-autoload")
    return controls


def load_kernel(options: argparse.Namespace, extra: Sequence[str] = (),
                tolerant: bool = False) -> tuple[Any, list[str]]:
    """The kernel for the command's plugin selection (and ``-p`` among ``extra``)."""
    from ._api import load

    controls = _plugin_controls(options)
    if tolerant:
        # an impossible plugin ordering marks those plugins broken, so the rest can be listed
        from ._kernel import Kernel
        from ._plugins import PluginSelection, PluginSet

        selection = PluginSelection.from_environment()
        rest = selection.take_from_argv([*controls, *extra])
        return Kernel(PluginSet(selection, tolerant=True)), rest
    return load([*controls, *extra])


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
    if options.json:
        print(to_json(rows, indent=2))
    else:
        _print_plugin_table(rows)
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
    from ._discovery import cached

    return cached("list", _list_fingerprint(options), lambda: _list_rows(options),
                  shape=_LISTING_SHAPE, track_imports=True, per_key=True)


#: What a cached listing must hold to be used; a tampered or foreign file is recomputed.
_LISTING_SHAPE = {
    "rows": [{"name": str, "status": str, "source": str, "reason": str, "version": (str, None),
              "distribution": (str, None), "entry_point": (str, None), "hooks": [str],
              "after": [str], "before": [str], "flags": int, "declared_flags": int}],
    "order": [str], "problems": [str]}


def _list_rows(options: argparse.Namespace) -> dict[str, Any]:
    from ._discovery import depends_on

    try:
        kernel, _rest = load_kernel(options)
    except PluginError:
        kernel, _rest = load_kernel(options, tolerant=True)
    depends_on(kernel.sources)  # a table read back: the options modules it came from
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


def _list_fingerprint(options: argparse.Namespace, *view: str) -> str:
    """What ``megaplug list`` (or a ``view`` of the plugins' code: a command and its
    arguments) depends on, known before computing it: the selection and the installed
    distributions (the cache adds the files of every module it imported)."""
    from ._discovery import code_fingerprint
    from ._plugins import PluginSelection

    selection = PluginSelection.from_environment()
    selection.take_from_argv(_plugin_controls(options))
    return code_fingerprint(["3", *view, repr(sorted(selection.load)),
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
    from ._discovery import cached, depends_on

    def compute() -> dict[str, Any]:
        kernel, _rest = load_kernel(options)
        depends_on(kernel.sources)
        return {"plugins": {name: [str(record.status), record.reason]
                            for name, record in kernel.plugins.records.items()},
                "value": make(kernel)}

    return cached(kind, _list_fingerprint(options, kind, *key), compute,
                  shape={"plugins": dict, "value": shape}, track_imports=True, per_key=True,
                  accept=lambda stored: accept is None or accept(stored["value"]))


def _cmd_version(options: argparse.Namespace) -> int:
    import platform

    from ._version import __version__

    print(f"megaplug {__version__} (Python {platform.python_version()}, "
          f"{os.path.dirname(__file__)})")
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


def check_plugin_name(plugins: Any, name: str | None, command: str) -> None:
    """A ``--plugin NAME`` that names no plugin is a usage error with a suggestion.

    ``plugins`` is a kernel, or a view's ``{name: [status, reason]}``."""
    if name is None:
        return
    if not isinstance(plugins, dict):
        plugins = {n: [str(r.status), r.reason] for n, r in plugins.plugins.records.items()}
    if name not in plugins:
        names = sorted(plugins)
        suggestion = suggest(name, names)
        hint = f"did you mean {suggestion}?" if suggestion else "the plugins are " + \
            ", ".join(names)
        raise UsageError(f"megaplug {command}: no plugin named {name!r} ({hint})")
    status, reason = plugins[name]
    if status in ("blocked", "broken"):
        raise UsageError(f"megaplug {command}: plugin {name!r} is {status}: "
                         f"{reason}; its flags are not loaded")


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


# -- resolve / explain -----------------------------------------------------------------

def target_from(options: argparse.Namespace) -> Any:
    """The target environment ``--assume`` / ``--assume-device-capability`` describe; every
    malformed one is named in one usage error."""
    from ._target import TargetEnvironment, parse_assumed_capability, parse_assumed_package

    packages: dict[str, str | None] = {}
    mistakes: list[str] = []
    for item in options.assume:
        try:
            name, version = parse_assumed_package(item)
        except ValueError as exc:
            mistakes.append(str(exc))
            continue
        packages[name] = version
    target = TargetEnvironment(packages=packages, environ=os.environ)
    if options.assume_device_capability is not None:
        try:
            target.device_capability = parse_assumed_capability(options.assume_device_capability)
        except ValueError as exc:
            mistakes.append(str(exc))
    if mistakes:
        raise UsageError("\n".join(f"megaplug: {mistake}" for mistake in mistakes))
    return target


def defaults_from(options: argparse.Namespace) -> dict[str, Any]:
    """``--defaults`` as a mapping (a JSON object, or ``@file`` holding one), read with the
    guards of config files: a regular file of sane size, UTF-8, no repeated key, no
    integer too long to handle, no nesting too deep."""
    text = options.defaults
    if not text:
        return {}
    from ._files import UntrustedInputError, parse_json, read_text_file

    where = "--defaults"
    try:
        if text.startswith("@"):
            where = f"--defaults file {text[1:]}"
            text = read_text_file(text[1:], "--defaults file")
        value = parse_json(text, where)
    except UntrustedInputError as exc:
        raise UsageError(f"megaplug: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"megaplug: {where} must hold a JSON object, not "
                         f"{type(value).__name__}")
    return value


def config_tokens(options: argparse.Namespace) -> list[str]:
    """The command's ``--config`` files as argv tokens."""
    tokens: list[str] = []
    for path in getattr(options, "config", ()):
        tokens += ["--config", path]
    return tokens


def _cmd_resolve(options: argparse.Namespace, args: list[str]) -> int:
    from .megatron import parse_and_validate_args
    from .megatron import provenance as provenance_of

    target = target_from(options)
    namespace = parse_and_validate_args(
        argv=[*_plugin_controls(options), *config_tokens(options), *args], environ=os.environ,
        args_defaults=defaults_from(options), target=target, torch_types=False, register=False,
        preflight=preflight_wanted())
    provenance = provenance_of(namespace)
    values = {k: encode(v) for k, v in vars(namespace).items()}
    if options.provenance:
        values = {k: provenance[k].to_dict() for k in sorted(values) if k in provenance}
    elif options.given:
        from ._config import Resolved

        given = Resolved({}, provenance, None, [], []).given_values()  # type: ignore[arg-type]
        # the facade's private markers (_is_global_batch_size_...) are not settings
        values = {k: encode(v) for k, v in given.items()
                  if k not in ("rank", "world_size") and not k.startswith("_")}
    sys.stdout.write(to_yaml(values) if options.format == "yaml"
                     else to_json(values, sort_keys=True) + "\n")
    return EXIT_OK


class _Explained:
    """A resolved namespace read like a draft: values by key, ``source(dest)``."""

    def __init__(self, values: dict[str, Any], provenance: dict[str, Any]) -> None:
        self._values, self._provenance = values, provenance

    def __getitem__(self, dest: str) -> Any:
        return self._values[dest]

    def __contains__(self, dest: object) -> bool:
        return dest in self._values

    def __iter__(self) -> Any:
        return iter(self._values)

    def source(self, dest: str) -> Any:
        return self._provenance[dest]


def preflight_wanted() -> bool:
    """The CLI runs the pre-flight checks unless ``MEGAPLUG_PREFLIGHT`` turns them off."""
    value = os.environ.get("MEGAPLUG_PREFLIGHT", "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def resolve_partially(options: argparse.Namespace, args: Sequence[str],
                      ) -> tuple[Any, ConfigError | None]:
    """Resolve as far as the pipeline gets: (the config, the error if any).

    The same pipeline as ``resolve`` -- the Megatron facade's, checkpoint arguments
    (``--use-checkpoint-args``) included. On an invalid configuration the config is the
    draft as the plugins left it, with provenance, which is what ``explain`` and ``diff``
    show.
    """
    from .megatron import ConfigError as FacadeError
    from .megatron import parse_and_validate_args
    from .megatron import provenance as provenance_of

    try:
        namespace = parse_and_validate_args(
            argv=[*_plugin_controls(options), *config_tokens(options), *args],
            environ=os.environ, args_defaults=defaults_from(options),
            target=target_from(options), torch_types=False, register=False,
            preflight=preflight_wanted())
    except FacadeError as exc:
        return exc.partial, exc
    provenance = provenance_of(namespace)
    values = {key: value for key, value in vars(namespace).items() if key in provenance}
    return _Explained(values, provenance), None


def involves(kernel: Any, problem: Problem, dest: str) -> bool:
    """Whether ``problem`` names the setting ``dest`` (by any of its spellings)."""
    for flag in problem.flags:
        spec = kernel.table.lookup(flag) or kernel.table.by_env.get(flag)
        if spec is not None and spec.dest == dest:
            return True
    spellings = [s for spec in kernel.table.by_dest.get(dest, ()) for s in spec.option_strings]
    words = set(problem.message.replace(",", " ").replace("(", " ").replace(")", " ").split())
    return dest in words or any(spelling in words for spelling in spellings)


def _cmd_explain(options: argparse.Namespace, args: list[str]) -> int:
    kernel, rest = load_kernel(options, args)
    spec = kernel.table.lookup(options.setting)
    if spec is None:
        record = kernel.inactive_flags.get(options.setting)
        if record is not None:
            print(f"megaplug explain: {options.setting} belongs to plugin {record.name!r}, "
                  f"which is {record.status}: {record.reason}", file=sys.stderr)
            return EXIT_INVALID
        suggestion = kernel.table.suggest(options.setting, list(kernel.table.by_option)
                                          + list(kernel.table.by_dest))
        hint = (f"did you mean {suggestion}?" if suggestion
                else "megaplug flags WORD finds settings")
        print(f"megaplug explain: no setting {options.setting!r} ({hint})", file=sys.stderr)
        return EXIT_INVALID
    _print_spec(kernel, spec)
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
    def pages(kernel: Any) -> list[list[str]]:
        from ._docs import reference_pages

        return [[name, text] for name, text in reference_pages(kernel).items()]

    def safe(pages: list[list[str]]) -> bool:  # a tampered file writes nowhere else
        return all(len(page) == 2 and _is_page_name(page[0]) for page in pages)

    written = sorted(_plugin_view(options, "docs", pages, [[str]], accept=safe)["value"])
    os.makedirs(options.out, exist_ok=True)
    for name, text in written:
        with open(os.path.join(options.out, name), "w", encoding="utf-8") as page:
            page.write(text)
    directory = os.path.abspath(options.out)
    print(f"wrote {len(written)} files to {directory}: "
          + ", ".join(name for name, _text in written))
    return EXIT_OK


def _is_page_name(name: str) -> bool:
    return (name.endswith(".md") and os.path.basename(name) == name
            and not name.startswith(".") and os.sep not in name and "/" not in name)


_HANDLERS: dict[str, Callable[[argparse.Namespace, list[str]], int]] = {
    "list": _cmd_list, "flags": _cmd_flags, "resolve": _cmd_resolve, "explain": _cmd_explain,
    "diff": _cmd_diff, "schema": _cmd_schema, "completion": _cmd_completion, "docs": _cmd_docs,
}


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
