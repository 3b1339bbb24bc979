"""``megaplug`` command line: list, flags, resolve, explain, docs.

Exit codes: 0 success, 2 an invalid configuration or usage (every problem on stderr),
1 an internal failure such as a broken plugin set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from ._errors import ConfigError, PluginError
from ._values import encode

EXIT_OK, EXIT_INTERNAL, EXIT_INVALID = 0, 1, 2


class _UsageError(Exception):
    pass


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(f"{self.prog}: {message}")


def _build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="megaplug",
        description="Inspect megaplug plugins and flags, and resolve training configurations.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    def plugin_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("-p", dest="plugin_controls", action="append", default=[],
                         metavar="NAME", help="load plugin NAME, or block it with no:NAME")
        sub.add_argument("--no-autoload", action="store_true",
                         help="do not load plugins from installed entry points")

    listing = commands.add_parser("list", help="every plugin, its status and why")
    listing.add_argument("--json", action="store_true", help="print JSON")
    plugin_options(listing)

    flags = commands.add_parser("flags", help="every flag of every active plugin")
    flags.add_argument("--json", action="store_true", help="print JSON")
    flags.add_argument("--plugin", help="only this plugin's flags")
    plugin_options(flags)

    def resolve_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--config", action="append", default=[], metavar="FILE",
                         help="YAML or JSON file of settings (repeatable; later files win)")
        sub.add_argument("--defaults", metavar="JSON",
                         help="caller defaults as a JSON object (or @file), like args_defaults")
        sub.add_argument("--assume", action="append", default=[], metavar="NAME=VERSION",
                         help="assume package NAME is installed at VERSION on the target "
                              "(NAME=none: not installed)")
        sub.add_argument("--assume-device-capability", metavar="MAJOR.MINOR",
                         help="assume the target GPU's compute capability ('none': no GPU)")

    resolve = commands.add_parser("resolve", help="resolve ARGS and print every value")
    resolve_options(resolve)
    resolve.add_argument("--format", choices=("json", "yaml"), default="json")
    shown = resolve.add_mutually_exclusive_group()
    shown.add_argument("--provenance", action="store_true",
                       help="print where each value came from instead of the values")
    shown.add_argument("--given", action="store_true",
                       help="print only the settings as given (a config file that reproduces "
                            "this resolve with --config)")

    # DEST_OR_FLAG is taken out before parsing: a flag spelling would look like an option.
    explain = commands.add_parser("explain", help="one setting: owner, type, value, provenance",
                                  usage="megaplug explain DEST_OR_FLAG [options] [--] ARGS...")
    resolve_options(explain)

    docs = commands.add_parser("docs", help="write the per-plugin flag reference")
    docs.add_argument("--out", default="docs/flags", help="output directory")
    plugin_options(docs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    tokens = list(sys.argv[1:] if argv is None else argv)
    own, passthrough = _split_passthrough(tokens)
    parser = _build_parser()
    setting = None
    if own[:1] == ["explain"] and len(own) > 1:
        setting = own.pop(1)
    try:
        options, unknown = parser.parse_known_args(own)
        if options.command == "explain":
            if setting is None:
                raise _UsageError("megaplug explain: expected DEST_OR_FLAG")
            options.setting = setting
        if options.command in ("list", "flags", "docs") and unknown:
            raise _UsageError(f"megaplug {options.command}: unrecognized arguments: "
                              + " ".join(unknown))
        handler = {"list": _cmd_list, "flags": _cmd_flags, "resolve": _cmd_resolve,
                   "explain": _cmd_explain, "docs": _cmd_docs}[options.command]
        return handler(options, [*unknown, *passthrough])
    except _UsageError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    except ConfigError as exc:
        _print_problems(exc)
        return EXIT_INVALID
    except PluginError as exc:
        print(f"megaplug: plugin error: {exc}", file=sys.stderr)
        return EXIT_INVALID


def _split_passthrough(tokens: list[str]) -> tuple[list[str], list[str]]:
    if "--" in tokens:
        index = tokens.index("--")
        return tokens[:index], tokens[index + 1:]
    return tokens, []


def _print_problems(error: ConfigError) -> None:
    count = len(error.problems)
    print(f"megaplug: {count} problem{'s' if count != 1 else ''} in the configuration:",
          file=sys.stderr)
    for problem in error.problems:
        print(f"  - {problem}", file=sys.stderr)


def _plugin_controls(options: argparse.Namespace) -> list[str]:
    """The command's ``-p`` / ``--no-autoload`` options, as argv tokens for the kernel."""
    controls: list[str] = []
    for name in getattr(options, "plugin_controls", []):
        controls += ["-p", name]
    if getattr(options, "no_autoload", False):
        controls.append("--no-autoload")
    return controls


def _kernel(options: argparse.Namespace, extra: Sequence[str] = (), tolerant: bool = False):
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


# -- list / flags ----------------------------------------------------------------------

def _cmd_list(options: argparse.Namespace, _: list[str]) -> int:
    from ._discovery import cached

    listing = cached("list", _list_fingerprint(options), lambda: _list_rows(options))
    rows, problems = listing["rows"], listing["problems"]
    if options.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    width = max(len(r["name"]) for r in rows) if rows else 4
    for row in rows:
        origin = row["distribution"] or row["source"]
        line = (f"{row['name']:<{width}}  {row['status']:<11}  {row['version'] or '-':<8}  "
                f"{origin:<24}  flags={row['flags']:<4} hooks={','.join(row['hooks']) or '-'}")
        if row["after"]:
            line += f"  after={','.join(row['after'])}"
        if row["before"]:
            line += f"  before={','.join(row['before'])}"
        print(line)
        if row["reason"]:
            print(f"{'':<{width}}  -> {row['reason']}")
    for problem in problems:
        print(f"problem: {problem}")
    return EXIT_OK


def _list_rows(options: argparse.Namespace) -> dict[str, Any]:
    try:
        kernel, _rest = _kernel(options)
    except PluginError:
        kernel, _rest = _kernel(options, tolerant=True)
    counts: dict[str, int] = {}
    for spec in kernel.table:
        if spec.kind == "flag":
            counts[spec.plugin] = counts.get(spec.plugin, 0) + 1
    inactive_counts: dict[str, int] = {}
    for record in kernel.inactive_flags.values():
        inactive_counts[record.name] = inactive_counts.get(record.name, 0) + 1
    order = {name: index for index, name in enumerate(kernel.plugins.order)}
    records = sorted(kernel.plugins.records.values(),
                     key=lambda r: (r.name not in order, order.get(r.name, 0), r.name))
    rows = []
    for record in records:
        row = record.to_dict()
        row["flags"] = counts.get(record.name, 0)
        row["declared_flags"] = counts.get(record.name, 0) or inactive_counts.get(record.name, 0)
        rows.append(row)
    return {"rows": rows, "problems": [str(p) for p in kernel.setup_problems]}


def _list_fingerprint(options: argparse.Namespace) -> str | None:
    """What ``megaplug list`` depends on: the selection, the installed distributions and
    every selected plugin's source files. ``None`` (no caching) when one cannot be found."""
    from ._discovery import code_fingerprint, entry_points
    from ._plugins import BUILTIN_PLUGINS, PluginSelection

    selection = PluginSelection.from_environment()
    controls = _plugin_controls(options)
    selection.take_from_argv(controls)
    modules = [m for m in BUILTIN_PLUGINS if m.rsplit(".", 1)[-1] not in selection.block]
    if selection.autoload:
        modules += [ep.value.partition(":")[0].strip() for ep in entry_points()
                    if ep.name not in selection.block]
    modules += [m for m in selection.load if m not in selection.block]
    key = [repr(sorted(selection.load)), repr(sorted(selection.block)), str(selection.autoload)]
    return code_fingerprint(modules, key)


def flag_rows(kernel: Any, plugin: str | None = None) -> list[dict[str, Any]]:
    """Every flag spec as a JSON-ready row (used by ``flags`` and ``docs``)."""
    rows = []
    for spec in kernel.table:
        if plugin and spec.plugin != plugin:
            continue
        rows.append({
            "plugin": spec.plugin,
            "kind": spec.kind,
            "option_strings": list(spec.option_strings),
            "dest": spec.dest,
            "action": spec.argparse_action.lstrip("_") if spec.kind == "flag" else None,
            "type": spec.type_name,
            "default": encode(spec.default),
            "choices": encode(list(spec.choices)) if spec.choices is not None else None,
            "nargs": spec.nargs,
            "hidden": spec.hidden,
            "deprecated": spec.deprecated,
            "env": spec.env,
            "help": spec.help,
        })
    return rows


def _cmd_flags(options: argparse.Namespace, _: list[str]) -> int:
    kernel, _rest = _kernel(options)
    rows = flag_rows(kernel, options.plugin)
    if options.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for row in rows:
        if row["kind"] != "flag":
            continue
        spelled = ", ".join(row["option_strings"])
        detail = f"{row['action']}"
        if row["type"]:
            detail += f" {row['type']}"
        if row["nargs"] is not None:
            detail += f" nargs={row['nargs']}"
        detail += f" default={json.dumps(row['default'])}"
        if row["choices"] is not None:
            detail += f" choices={','.join(map(str, row['choices']))}"
        print(f"[{row['plugin']}] {spelled} -> {row['dest']}  ({detail})")
    return EXIT_OK


# -- resolve / explain -----------------------------------------------------------------

def _target(options: argparse.Namespace):
    from ._target import TargetEnvironment

    packages: dict[str, str | None] = {}
    for item in options.assume:
        name, sep, version = item.partition("=")
        if not sep or not name:
            raise _UsageError(f"--assume expects NAME=VERSION, got {item!r}")
        packages[name] = None if version.lower() in ("none", "") else version
    target = TargetEnvironment(packages=packages, environ=os.environ)
    capability = options.assume_device_capability
    if capability is not None:
        if capability.lower() == "none":
            target.device_capability = None
        else:
            major, _, minor = capability.partition(".")
            if not major.isdigit() or (minor and not minor.isdigit()):
                raise _UsageError("--assume-device-capability expects MAJOR.MINOR, "
                                  f"got {capability!r}")
            target.device_capability = (int(major), int(minor or 0))
    return target


def _defaults(options: argparse.Namespace) -> dict[str, Any]:
    text = options.defaults
    if not text:
        return {}
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise _UsageError(f"--defaults: cannot read {text[1:]}: {exc.strerror}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _UsageError(f"--defaults is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise _UsageError("--defaults must be a JSON object")
    return value


def _config_tokens(options: argparse.Namespace) -> list[str]:
    tokens: list[str] = []
    for path in options.config:
        tokens += ["--config", path]
    return tokens


def _cmd_resolve(options: argparse.Namespace, args: list[str]) -> int:
    from .megatron import parse_and_validate_args, provenance as provenance_of

    target = _target(options)
    namespace = parse_and_validate_args(
        argv=[*_config_tokens(options), *args], environ=os.environ,
        args_defaults=_defaults(options), target=target, torch_types=False)
    provenance = provenance_of(namespace)
    values = {k: encode(v) for k, v in vars(namespace).items()}
    if options.provenance:
        values = {k: provenance[k].to_dict() for k in sorted(values) if k in provenance}
    elif options.given:
        from ._config import Resolved

        given = Resolved({}, provenance, None, [], []).given()  # type: ignore[arg-type]
        # the facade's private markers (_is_global_batch_size_...) are not settings
        values = {k: encode(v) for k, v in given.items()
                  if k not in ("rank", "world_size") and not k.startswith("_")}
    if options.format == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(values, sort_keys=True))
    else:
        print(json.dumps(values, indent=1, sort_keys=True))
    return EXIT_OK


def _cmd_explain(options: argparse.Namespace, args: list[str]) -> int:
    from ._sources import take_config_files

    kernel, rest = _kernel(options, args)
    spec = kernel.table.lookup(options.setting)
    if spec is None:
        record = kernel.inactive_flags.get(options.setting)
        if record is not None:
            print(f"{options.setting} belongs to plugin {record.name!r}, which is "
                  f"{record.status}: {record.reason}", file=sys.stderr)
            return EXIT_INVALID
        suggestion = kernel.table.suggest(options.setting, list(kernel.table.by_option)
                                          + list(kernel.table.by_dest))
        hint = f" (did you mean {suggestion}?)" if suggestion else ""
        print(f"megaplug explain: no setting {options.setting!r}{hint}", file=sys.stderr)
        return EXIT_INVALID
    specs = kernel.table.by_dest[spec.dest]
    print(f"setting:   {spec.dest}")
    print(f"plugin:    {spec.plugin}")
    spellings = [o for s in specs for o in s.option_strings]
    if spellings:
        print(f"flags:     {', '.join(spellings)}")
    if spec.env:
        print(f"env:       {spec.env}")
    print(f"kind:      {spec.kind}"
          + (f" ({spec.argparse_action.lstrip('_')})" if spec.kind == "flag" else ""))
    print(f"type:      {spec.type_name or '-'}" + (f", nargs={spec.nargs}" if spec.nargs else ""))
    print(f"default:   {json.dumps(encode(spec.default))}")
    if spec.choices is not None:
        print(f"choices:   {', '.join(str(encode(c)) for c in spec.choices)}")
    if spec.deprecated:
        print(f"deprecated: {spec.deprecated}")
    if spec.help:
        print(f"help:      {spec.help}")
    files, rest = take_config_files([*_config_tokens(options), *rest])
    try:
        resolved = kernel.resolve(rest, config_files=files, defaults=_defaults(options),
                                  environ=os.environ, target=_target(options))
    except ConfigError as exc:
        print("value:     (configuration is invalid)")
        _print_problems(exc)
        return EXIT_INVALID
    if spec.dest not in resolved:
        print(f"value:     (removed: {spec.dest} is retired during resolution)")
        return EXIT_OK
    print(f"value:     {json.dumps(encode(resolved[spec.dest]))}")
    print("provenance:")
    for step in resolved.source(spec.dest).history():
        print(f"  - {step.describe()}")
    return EXIT_OK


def _cmd_docs(options: argparse.Namespace, _: list[str]) -> int:
    from ._docs import write_reference

    kernel, _rest = _kernel(options)
    written = write_reference(kernel, options.out)
    print(f"wrote {len(written)} files to {options.out}")
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
