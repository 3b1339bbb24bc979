"""``megaplug diff A [B] [-- ARGS]``: the settings whose resolved values differ.

A side is a config file (resolved with ARGS on top), a saved ``megaplug resolve`` output
(JSON or YAML, taken as it is), a checkpoint directory (the arguments its run saved) or,
when only one path is given, ARGS alone. Reading a checkpoint needs torch, imported only
then; everything else stays torch-free.
"""

from __future__ import annotations

import argparse
import os
import sys

from .._errors import Problem
from ..values._encoding import encode, to_json
from ._parser import EXIT_INTERNAL, EXIT_INVALID, EXIT_OK, UsageError
from ._shared import load_kernel, print_problems, resolve_partially

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

_UNOWNED = "(no installed plugin)"


class Side:
    """One side of a diff: encoded values, where each came from, and any problems."""

    def __init__(self, label: str, kind: str, values: dict[str, Any],
                 provenance: dict[str, str], problems: Sequence[Problem] = ()) -> None:
        self.label = label
        self.kind = kind
        self.values = values
        self.provenance = provenance
        self.problems = tuple(problems)


def run_diff(options: argparse.Namespace, args: list[str]) -> int:
    """The ``diff`` command: print the differences; the exit code."""
    if len(options.sides) > 2:
        raise UsageError("megaplug diff: compares two things, got "
                         f"{len(options.sides)}: {' '.join(options.sides)}")
    kernel, rest = load_kernel(options, args)
    if len(options.sides) == 1 and not rest:
        raise UsageError("megaplug diff: compare A with what? give B, or the training flags "
                         "after -- (megaplug diff CHECKPOINT_DIR -- --num-layers 24 ...)")
    # with two paths, ARGS go on top of each config file; with one, ARGS are the other side
    on_top = rest if len(options.sides) == 2 else []
    sides = [load_side(kernel, options, path, on_top) for path in options.sides]
    if len(sides) == 1:
        sides.append(_resolved_side(kernel, options, "command line", "command-line", rest))
    a, b = sides
    differences = compare(kernel, a, b)
    if options.json:
        print(to_json(_as_json(a, b, differences)))
    else:
        _print_text(a, b, differences)
    invalid = False
    for name, side in (("A", a), ("B", b)):
        if side.problems:
            invalid = True
            print(f"megaplug diff: {name} ({side.label}) is not a valid configuration; its "
                  "values are shown as far as resolution got", file=sys.stderr)
            print_problems(side.problems)
    if invalid:
        return EXIT_INVALID
    return EXIT_INTERNAL if differences and options.exit_code else EXIT_OK


def load_side(kernel: Any, options: argparse.Namespace, path: str, args: Sequence[str]) -> Side:
    """A checkpoint directory, a saved resolve output, or a config file resolved with ARGS."""
    if os.path.isdir(path):
        return checkpoint_side(kernel, path)
    from ..sources._config_files import ConfigFileError, load_config_file

    try:
        data = load_config_file(path)
    except ConfigFileError as exc:
        raise UsageError(f"megaplug diff: {exc}") from None
    unnamed = [key for key in data if not isinstance(key, str)]
    if unnamed:
        raise UsageError(f"megaplug diff: {path} has keys that name no setting: "
                         + ", ".join(map(repr, unnamed)) + " (settings are named by text, "
                         "such as num_layers)")
    if _is_resolve_output(kernel, data):
        return Side(f"saved resolve output {path}", "resolved", dict(data),
                    {key: f"saved resolve output {path}" for key in data})
    return _resolved_side(kernel, options, f"config file {path}", "config-file",
                          ["--config", path, *args])


def _is_resolve_output(kernel: Any, data: dict[str, Any]) -> bool:
    """A resolve output holds computed settings, which a config file cannot (a key such as
    ``_comment`` is a config file's mistake, reported when it is resolved)."""
    for key in data:
        spec = kernel.table.lookup(key)
        if spec is not None and spec.kind == "computed":
            return True
    return False


def _resolved_side(kernel: Any, options: argparse.Namespace, label: str, kind: str,
                   args: Sequence[str]) -> Side:
    config, error = resolve_partially(options, args)
    values = {dest: encode(config[dest]) for dest in config}
    provenance = {dest: config.source(dest).describe() for dest in config}
    return Side(label, kind, values, provenance, error.problems if error else ())


def checkpoint_side(kernel: Any, directory: str) -> Side:
    """The arguments a checkpoint's run saved, read with the facade's allow-list of types."""
    from ..megatron import _checkpoint

    try:
        path = _checkpoint.checkpoint_file(directory)
    except _checkpoint.CheckpointArgsError as exc:
        raise UsageError(f"megaplug diff: {exc}") from None
    allowed = _checkpoint.declared_enum_types(kernel)
    try:
        state = _checkpoint.load_saved_state(path, allowed)
    except ImportError:
        raise UsageError("megaplug diff: reading a checkpoint's arguments needs torch "
                         "(pip install torch)") from None
    except _checkpoint.CheckpointArgsError as exc:
        raise UsageError(f"megaplug diff: {exc}") from None
    iteration = state.get("iteration")
    label = f"checkpoint {directory}" + (f" (iteration {iteration})"
                                         if iteration is not None else "")
    values = {key: encode(value) for key, value in vars(state["args"]).items()
              if not key.startswith("_")}
    return Side(label, "checkpoint", values, {key: f"checkpoint {directory}" for key in values})


def compare(kernel: Any, a: Side, b: Side) -> list[dict[str, Any]]:
    """Every setting whose value differs (or that one side lacks), grouped by plugin."""
    found = []
    for dest in sorted(set(a.values) | set(b.values)):
        if dest.startswith("_"):
            continue
        in_a, in_b = dest in a.values, dest in b.values
        if in_a and in_b and a.values[dest] == b.values[dest]:
            continue
        found.append({
            "setting": dest,
            "plugin": kernel.table.owner(dest) or _UNOWNED,
            "a": _entry(a, dest), "b": _entry(b, dest),
        })
    found.sort(key=lambda d: (d["plugin"] == _UNOWNED, d["plugin"], d["setting"]))
    return found


def _entry(side: Side, dest: str) -> dict[str, Any]:
    if dest not in side.values:
        return {"present": False, "value": None, "provenance": None}
    return {"present": True, "value": side.values[dest], "provenance": side.provenance.get(dest)}


def _shown(entry: dict[str, Any]) -> str:
    return to_json(entry["value"], indent=None) if entry["present"] else "(absent)"


def _print_text(a: Side, b: Side, differences: list[dict[str, Any]]) -> None:
    print(f"A: {a.label}")
    print(f"B: {b.label}")
    plugin = None
    for difference in differences:
        if difference["plugin"] != plugin:
            plugin = difference["plugin"]
            print(f"[{plugin}]")
        print(f"  {difference['setting']}: {_shown(difference['a'])} -> "
              f"{_shown(difference['b'])}")
        for name in ("a", "b"):
            if difference[name]["present"]:
                print(f"      {name.upper()}: {difference[name]['provenance']}")
    compared = len({k for k in (*a.values, *b.values) if not k.startswith("_")})
    count = len(differences)
    print(f"{count or 'no'} setting{'s' if count != 1 else ''} differ{'s' if count == 1 else ''}"
          f" ({compared} compared)")


def _as_json(a: Side, b: Side, differences: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "a": {"label": a.label, "kind": a.kind, "problems": [p.to_dict() for p in a.problems]},
        "b": {"label": b.label, "kind": b.kind, "problems": [p.to_dict() for p in b.problems]},
        "differences": differences,
    }
