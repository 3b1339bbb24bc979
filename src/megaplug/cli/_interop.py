"""``megaplug export --to FORMAT`` and ``megaplug import FORMAT FILE``: a launch in another
program's config dialect, and back.

The command line knows no format itself. A distribution offers each under an entry-point
group, by the name the command takes, as ``megaplug-bridge`` does::

    [project.entry-points."megaplug.export"]
    mlm-config = "megaplug_bridge.mlm_config:export"

    [project.entry-points."megaplug.import"]
    mlm-config = "megaplug_bridge.mlm_config:import_config"

``export(launch, output_format)`` receives the launch (a mapping: ``argv``, ``environ``,
``args_defaults``, ``target``, ``preflight``) and ``yaml`` or ``json``, and returns an
object with ``text`` (what to write) and ``not_exported`` (one mapping per setting the
format has no home for: ``flag`` or ``section``, and ``reason``).
``import_config(path, overrides, target, environ)`` (``environ``: the job's ``WORLD_SIZE``,
when set) returns an object with ``argv`` (the training
flags), ``one_way`` (``{field: why}``: the format's values no flag sets) and, if it has
any, ``notes`` (lines on how the file was read). Either
raises ``ValueError`` saying why it cannot (exit 2); megaplug's own problems with the
launch come as its ``ConfigError`` (every problem, exit 2).
"""

from __future__ import annotations

import os
import sys

from ._parser import EXIT_OK, UsageError
from ._shared import config_tokens, defaults_from, plugin_controls, preflight_wanted, target_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

EXPORT_GROUP, IMPORT_GROUP = "megaplug.export", "megaplug.import"


def format_handler(group: str, name: str, command: str) -> Callable[..., Any]:
    """The entry point ``name`` of ``group``, loaded; a usage error naming the installed
    formats when there is none of that name."""
    from ..cache._entry_points import group_entry_points
    from .._errors import did_you_mean

    entries = {entry.name: entry for entry in group_entry_points(group)}
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none is installed"
        raise UsageError(f"megaplug {command}: no format {name!r}{did_you_mean(name, entries)}"
                         f" (formats: {known}; a distribution adds one under the {group} "
                         "entry-point group)")
    return entries[name].load()  # type: ignore[no-any-return]


def run_export(options: argparse.Namespace, args: list[str]) -> int:
    """The ``export`` command: the launch in the chosen format, on stdout or ``-o FILE``;
    what has no home in it on stderr (and in the JSON)."""
    handler = format_handler(EXPORT_GROUP, options.to, "export")
    launch = {"argv": [*plugin_controls(options), *config_tokens(options),
                       *_source_tokens(options.source), *args],
              "environ": os.environ, "args_defaults": defaults_from(options),
              "target": target_from(options), "preflight": preflight_wanted()}
    try:
        exported = handler(launch, options.format)
    except ValueError as exc:
        raise UsageError(f"megaplug export: {exc}") from None
    if options.output:
        with open(options.output, "w", encoding="utf-8") as handle:
            handle.write(exported.text)
    else:
        sys.stdout.write(exported.text)
    if exported.not_exported and options.format != "json":
        print(f"megaplug export: {len(exported.not_exported)} given setting(s) have no home "
              f"in {options.to}:", file=sys.stderr)
        for row in exported.not_exported:
            print(f"  - {row.get('flag') or row.get('section')}: {row['reason']}",
                  file=sys.stderr)
    return EXIT_OK


def _source_tokens(source: str | None) -> list[str]:
    """SOURCE as training flags: a config file (any format a reader knows) is ``--config``,
    a checkpoint directory the arguments its run saved (``--use-checkpoint-args``)."""
    if source is None:
        return []
    if os.path.isdir(source):
        return ["--load", source, "--use-checkpoint-args"]
    return ["--config", source]


def run_import(options: argparse.Namespace, args: list[str]) -> int:
    """The ``import`` command: the training flags reproducing FILE, on stdout."""
    import argparse
    import shlex

    handler = format_handler(IMPORT_GROUP, options.format_name, "import")
    stated = {**vars(options), "assume": [*options.assume, *(
        [f"megatron_core={options.to_version}"] if options.to_version else [])]}
    target = target_from(argparse.Namespace(**stated))
    try:
        imported = handler(options.file, [*options.overrides, *args], target, os.environ)
    except ValueError as exc:
        raise UsageError(f"megaplug import: {exc}") from None
    if options.format == "json":
        from ..values._encoding import to_json

        print(to_json({"argv": imported.argv, "one_way": imported.one_way,
                       "notes": list(getattr(imported, "notes", []))}))
    else:
        print(shlex.join(imported.argv))
        for note in getattr(imported, "notes", []):
            print(f"megaplug import: {note}", file=sys.stderr)
        if imported.one_way:
            print(f"megaplug import: {len(imported.one_way)} field(s) of {options.file} no "
                  "flag sets (--format json lists them, each with why)", file=sys.stderr)
    return EXIT_OK

