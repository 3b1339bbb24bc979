"""Regenerate the per-release Megatron flag facts megaplug targets (issue 27).

For each supported Megatron release (the newest patch of each megatron-core minor from 0.13,
and Megatron-LM main at the commit megaplug's parity cases come from), this extracts the
release's ``megatron/`` package from Megatron-LM's git history, builds that release's own
argparse parser with its own ``add_megatron_arguments`` in the Megatron tier's Python 3.12
environment, and reads every action's facts off it (the fields of
``../shared/megatron/flags.jsonl``). It then writes, as committed data:

* ``data/megatron-releases/RELEASE.jsonl`` -- each release's measured parser, one action per
  line (the raw facts, for the tests and for anyone re-checking them);
* ``src/megaplug/environment/_megatron_lines.py`` -- the supported release lines (how a
  version maps to one) for the target environment;
* each plugin package's ``megatron_releases.py`` -- for the settings that plugin owns, the
  lines that have each flag and every fact that differs between lines (default, type,
  choices, nargs, action, option strings), applied by the kernel through
  ``megaplug.LineFacts`` to the target line.

Usage: ``python scripts/gen_megatron_releases.py`` (any Python with megaplug installed; it runs
the measurements with ``MEGATRON_PYTHON``, default the tier's environment).
"""

from __future__ import annotations

import argparse
import enum
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("MEGATRON_LM_GIT", "/work/.mirror/NVIDIA+Megatron-LM/repo"))
MEGATRON_PYTHON = os.environ.get(
    "MEGATRON_PYTHON", str(Path.home() / ".cache/megaplug/megatron-core-0.19.2-py312/bin/python"))
DATA = ROOT / "data" / "megatron-releases"
SHARED = ROOT.parent / "shared" / "megatron"

#: Line label -> the git revision measured for it (the newest patch of each minor).
RELEASES: dict[str, str] = {
    "0.13": "core_v0.13.1",
    "0.14": "core_v0.14.0",
    "0.15": "core_v0.15.3",
    "0.16": "core_v0.16.1",
    "0.17": "core_v0.17.1",
    "0.18": "core_v0.18.2",
    "0.19": "core_v0.19.0",
    "main": "d98e8a64dd",
}
#: The line megaplug's own flags describe: main plus the seed's newer flags.
SEED = "seed"
#: Facts compared between lines (help text and metavars are not facts megaplug keeps).
FACTS = ("option_strings", "action", "type", "default", "choices", "nargs", "const")


# -- measuring one release (runs inside the Megatron environment) -------------------------

def _encode(value: object) -> object:
    """A default or choice as flags.jsonl writes it: enums as ``Class.member``, torch
    dtypes as ``torch.float32``, containers item by item."""
    if isinstance(value, int) and isinstance(value, enum.Enum):
        return int(value)  # an IntEnum (a signal) as JSON writes it
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value)
    if isinstance(value, (list, tuple, range)):
        return [_encode(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def measure(tree: str) -> list[dict[str, object]]:
    """Every action of the release's parser under ``tree`` (its ``megatron`` package first on
    ``sys.path``), as flags.jsonl facts."""
    sys.path.insert(0, tree)
    arguments = _import_arguments()
    if not arguments.__file__.startswith(tree):
        raise SystemExit(f"measured {arguments.__file__}, not the release under {tree}")
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser = arguments.add_megatron_arguments(parser) or parser
    groups = {id(action): group.title for group in parser._action_groups
              for action in group._group_actions}
    mutex = {id(action): index for index, group in enumerate(parser._mutually_exclusive_groups)
             for action in group._group_actions}
    facts = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        kind = action.type
        facts.append({
            "action": type(action).__name__, "choices": _encode(action.choices)
            if action.choices is not None else None, "const": _encode(action.const),
            "default": _encode(action.default), "dest": action.dest,
            "group": groups.get(id(action)), "help_suppressed": action.help == argparse.SUPPRESS,
            "metavar": action.metavar, "mutex_group": mutex.get(id(action)),
            "nargs": action.nargs, "option_strings": list(action.option_strings),
            "required": action.required,
            "type": _type_name(kind)})
    return facts


class _Stub(types.ModuleType):
    """A third-party module the release imports but this environment lacks (``six`` for an
    old tokenizer): any attribute is another stub, callable and subclassable."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Stub(f"{self.__name__}.{name}")

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self

    def __mro_entries__(self, bases: tuple[object, ...]) -> tuple[type, ...]:
        return (_StubBase,)


class _StubBase:
    """What a class deriving from a stub derives from (``class X(BaseModel, extra=...)``)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        pass

    def __class_getitem__(cls, item: object) -> type:
        return cls


def _import_arguments() -> types.ModuleType:
    """``megatron.training.arguments``, stubbing the modules outside Megatron it cannot import
    (each stub is printed on stderr); never a Megatron module."""
    import importlib

    import torch.utils.cpp_extension as cpp_extension

    def no_toolchain(*args: object, **kwargs: object) -> object:
        raise RuntimeError("no CUDA toolchain: extension not built")

    # some releases build a CUDA extension at import; without a GPU that must fail softly
    cpp_extension.load_inline = cpp_extension.load = no_toolchain
    for _ in range(20):
        try:
            return importlib.import_module("megatron.training.arguments")
        except ModuleNotFoundError as missing:
            name = missing.name or ""
            if not name or name.split(".")[0] == "megatron":
                raise
            print(f"stubbed {name}", file=sys.stderr)
            sys.modules[name] = _Stub(name)
            for loaded in [m for m in sys.modules if m.split(".")[0] == "megatron"]:
                del sys.modules[loaded]
    raise SystemExit("too many missing modules")


def _type_name(kind: object) -> str | None:
    """A ``type=`` callable's name: a builtin's own, anything else's qualified name."""
    if kind is None:
        return None
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", None) or type(kind).__name__
    return name if module in (None, "builtins") else f"{module}.{name}"


# -- driving the measurements and writing the data ---------------------------------------

def measure_release(revision: str) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="megatron-release-") as tree:
        archive = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", revision, "megatron"],
                                 check=True, capture_output=True).stdout
        archive_path = Path(tree) / "megatron.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tree, filter="data")
        done = subprocess.run([MEGATRON_PYTHON, __file__, "--measure", tree],
                              capture_output=True, text=True, cwd=tree)
        if done.returncode:
            raise SystemExit(f"measuring {revision} failed:\n{done.stderr[-3000:]}")
        for line in done.stderr.splitlines():
            if line.startswith("stubbed "):
                print(f"  {revision}: {line}")
        return json.loads(done.stdout.strip().splitlines()[-1])


_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false", "BooleanOptionalAction": "boolean_optional",
            "_StoreConstAction": "store_const", "_AppendAction": "append", "_CountAction": "count"}
#: The plugins that carry Megatron's own flags (a third party's flags have no lines).
MEGATRON_PLUGINS = ("model", "parallel", "precision", "training", "checkpointing", "data",
                    "logging", "resilience", "experimental", "moe", "mla", "fsdp", "gtp",
                    "inference", "rl", "distillation")


def megaplug_facts(spec: object) -> dict[str, object]:
    """A megaplug flag spec's facts, encoded as the measured ones are."""
    from megaplug.values._encoding import encode

    takes_value = spec.action in ("store", "append")
    return {"option_strings": list(spec.option_strings), "dest": spec.dest,
            "action": spec.action, "default": encode(spec.default),
            "choices": encode(list(spec.choices)) if spec.choices is not None else None,
            "nargs": spec.nargs if takes_value else 0,
            "const": encode(spec.const) if spec.action == "store_const" else None}


def measured_facts(fact: dict[str, object]) -> dict[str, object]:
    action = _ACTIONS.get(fact["action"], fact["action"])
    return {"option_strings": fact["option_strings"], "dest": fact["dest"], "action": action,
            "default": fact["default"], "choices": fact["choices"],
            "nargs": fact["nargs"] if action in ("store", "append") else 0,
            "const": fact["const"] if action == "store_const" else None}


def full_table() -> object:
    """Every flag megaplug's plugins declare, in any line (no line's facts applied)."""
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection

    return Kernel(PluginSet(PluginSelection.from_environment({})),
                  lines={"megatron_core": "(every line)"}).table


#: Which plugin owns a flag only older releases have, by the start of its spelling (the
#: feature area it belongs to); checked in order, the first match wins.
OWNERS_BY_PREFIX = (
    ("--moe-", "moe"), ("--rl-", "rl"), ("--grpo-", "rl"), ("--langrl-", "rl"),
    ("--inference-", "inference"), ("--disable-chunked-prefill", "inference"),
    ("--retro-", "model"), ("--retriever-", "data"), ("--tokenizer-", "data"),
    ("--tiktoken-", "data"), ("--legacy-tokenizer", "data"), ("--hybrid-", "experimental"),
    ("--encoder-", "parallel"), ("--pipeline-model-parallel-split-rank", "parallel"),
    ("--no-scatter-gather-tensors-in-pipeline", "parallel"),
    ("--no-async-tensor-model-parallel-allreduce", "parallel"),
    ("--use-custom-fsdp", "fsdp"), ("--keep-fp8-transpose-cache-when-using-custom-fsdp", "fsdp"),
    ("--load-model-opt-format", "checkpointing"), ("--no-stream-ckpt-dequant", "checkpointing"),
    ("--use-legacy-models", "model"), ("--muon-", "training"),
    # 0.13-0.15 declare them whether or not kitchen is installed; later lines only with it,
    # where the kitchen plugin owns them (a line's flag an active plugin declares is its)
    ("--kitchen-config-file", "precision"), ("--kitchen-recipe-number", "precision"),
)


def _owner(options: list[str]) -> str | None:
    return next((plugin for prefix, plugin in OWNERS_BY_PREFIX if options[0].startswith(prefix)),
                None)


def _extra_fact(fact: dict[str, object]) -> dict[str, object]:
    """A measured flag as a LineFacts extra declares it (lines added by the caller)."""
    theirs = measured_facts(fact)
    kind = fact["type"] if fact["type"] in ("int", "float", "str", "bool") else None
    return {"option_strings": theirs["option_strings"], "dest": theirs["dest"],
            "action": theirs["action"], "type": kind, "default": fact["default"],
            "choices": fact["choices"], "nargs": theirs["nargs"] or None,
            "const": fact["const"]}


#: The types a line's facts may state (``type=`` a builtin, or none: text).
PLAIN_TYPES = {"int", "float", "str", "bool", None}


def _plain_type(name: str | None) -> str | None:
    """A measured or declared type's name as a line's facts state it; anything but a
    builtin's is ``"custom"`` (a converter of megaplug's own, never restated)."""
    return name if name in PLAIN_TYPES else "custom"


def line_facts(measured: dict[str, list[dict[str, object]]]) -> tuple[dict, dict, list]:
    """Per plugin: per flag (its first option string) the lines that have it and the facts
    that differ, and the flags it has only in some lines; and the measured flags no plugin
    can be given."""
    seed_only = {line.strip() for line in (SHARED / "seed_only_flags.txt").read_text().split()}
    table = full_table()
    claimed: set[tuple[str, str]] = set()
    per_plugin: dict[str, dict[str, dict[str, object]]] = {}
    extras: dict[str, dict[str, list[str]]] = {}  # plugin -> encoded extra -> its lines

    def add_extra(plugin: str, line: str, fact: dict[str, object]) -> None:
        encoded = json.dumps(_extra_fact(fact), sort_keys=True)
        extras.setdefault(plugin, {}).setdefault(encoded, []).append(line)
        claimed.update((line, option) for option in fact["option_strings"])

    for spec in table:
        if spec.kind != "flag" or spec.plugin not in MEGATRON_PLUGINS:
            continue
        ours = megaplug_facts(spec)
        stated: dict[str, object] = {}
        present = []
        for line, facts in measured.items():
            by_option = {option: fact for fact in facts for option in fact["option_strings"]}
            fact = next((by_option[o] for o in spec.option_strings if o in by_option), None)
            if fact is None:
                continue
            theirs = measured_facts(fact)
            if theirs["dest"] != ours["dest"]:  # that line's setting is another: its own flag
                add_extra(spec.plugin, line, fact)
                continue
            present.append(line)
            claimed.update((line, option) for option in fact["option_strings"])
            for field in ("default", "choices", "nargs", "const", "action", "option_strings"):
                if theirs[field] != ours[field]:
                    stated.setdefault(field, {})[line] = theirs[field]
            if _plain_type(fact["type"]) != _plain_type(spec.type_name) and {
                    _plain_type(fact["type"]), _plain_type(spec.type_name)} <= PLAIN_TYPES:
                stated.setdefault("type", {})[line] = _plain_type(fact["type"])
        if "main" in present or any(option in seed_only for option in spec.option_strings):
            present.append(SEED)
        if len(present) < len(measured) + 1:
            stated = {"lines": tuple(present), **stated}
        if stated:
            per_plugin.setdefault(spec.plugin, {})[spec.primary] = stated
    unowned = []
    for line, facts in measured.items():
        for fact in facts:
            options = fact["option_strings"]
            if any((line, o) in claimed for o in options):
                continue
            owner = _owner(options)
            if owner is None:
                unowned.append((line, options))
            else:
                add_extra(owner, line, fact)
    return per_plugin, extras, unowned


#: The keys each line's own validate_args adds to the namespace on every parity configuration
#: it accepts, measured by scripts/megatron-release-compare.sh --derived-keys.
DERIVED_KEYS = DATA / "derived-keys.json"


def add_derived_key_lines(per_plugin: dict[str, dict[str, dict[str, object]]]) -> None:
    """A computed setting some lines' validate_args never derives (GTP's remat sizes before
    0.19, the layer-wise distributed optimizer before 0.18) is present only in the lines
    that derive it, as a flag is only in the lines whose parser has it."""
    if not DERIVED_KEYS.exists():
        return
    derived = json.loads(DERIVED_KEYS.read_text())
    for spec in full_table():
        if spec.kind != "computed" or spec.plugin not in MEGATRON_PLUGINS:
            continue
        present = [line for line in RELEASES if spec.dest in derived.get(line, ())]
        if not present or len(present) == len(RELEASES):
            continue  # never derived on every configuration, or derived in every line
        if "main" in present:
            present.append(SEED)
        per_plugin.setdefault(spec.plugin, {})[spec.primary] = {"lines": tuple(present)}


_POSITIONS: dict[str, dict[str, int]] = {}


def _declared_at(flag: dict[str, object], line: str) -> tuple[int, int]:
    """Where ``line``'s parser declares ``flag``: (the line's place from the newest, the
    action's index)."""
    if line not in _POSITIONS:
        facts = [json.loads(row) for row in (DATA / f"{line}.jsonl").read_text().splitlines()]
        _POSITIONS[line] = {fact["option_strings"][0]: index for index, fact in enumerate(facts)}
    return -list(RELEASES).index(line), _POSITIONS[line].get(flag["option_strings"][0], 0)


def plugin_module(table: object, plugin: str) -> tuple[str, Path]:
    """The package a plugin's options class lives in, and its directory."""
    import importlib

    reference = table.options_classes[plugin]
    module_name = reference.partition(":")[0] if isinstance(reference, str) else (
        reference.__module__)
    package = module_name.rpartition(".")[0]
    return package, Path(importlib.import_module(package).__file__).parent


def write_plugin_facts(per_plugin: dict[str, dict[str, dict[str, object]]],
                       extras: dict[str, dict[str, list[str]]]) -> None:
    table = full_table()
    lines = (*RELEASES, SEED)
    for plugin in MEGATRON_PLUGINS:
        package, directory = plugin_module(table, plugin)
        settings = per_plugin.get(plugin, {})
        out = [f'"""How the {plugin} plugin\'s flags differ between Megatron\'s release lines.',
               "",
               "Generated by scripts/gen_megatron_releases.py from each release's own parser;",
               'do not edit by hand (see docs/megatron-compat.md)."""',
               "", "from megaplug.environment import LineFacts", "",
               f"FACTS = LineFacts(\"megatron_core\", {lines!r}, {{"]
        for option in sorted(settings):
            out.append(f"    {option!r}: {settings[option]!r},")
        out.append("}, (")
        flags = [(json.loads(encoded), tuple(lines))
                 for encoded, lines in extras.get(plugin, {}).items()]
        # in the order the newest line having it declares it: of two flags of one setting,
        # the first declared gives the default (argparse)
        flags.sort(key=lambda item: (item[0]["dest"], *_declared_at(item[0], item[1][-1])))
        for flag, flag_lines in flags:
            out.append(f"    {dict(flag, lines=flag_lines)!r},")
        out.append("))")
        path = directory / "megatron_releases.py"
        path.write_text("\n".join(out) + "\n")
        print(f"{plugin}: {len(settings)} flags with line facts, {len(flags)} extra -> {path.relative_to(ROOT)} "
              f"(bind with __megaplug_line_facts__ = \"{package}.megatron_releases:FACTS\")")


def write_lines() -> None:
    path = ROOT / "src" / "megaplug" / "environment" / "_megatron_lines.py"
    rows = []
    for line, revision in RELEASES.items():
        info = subprocess.run(["git", f"--git-dir={MIRROR}", "show",
                               f"{revision}:megatron/core/package_info.py"],
                              check=True, capture_output=True, text=True).stdout
        numbers = dict(re.findall(r"^(MAJOR|MINOR) = (\d+)", info, re.M))
        rows.append(f"    {line!r}: ({revision!r}, ({numbers['MAJOR']}, {numbers['MINOR']})),")
    rows.append(f"    {SEED!r}: (\"main + the seed's newer flags\", None),")
    text = path.read_text()
    head, _, rest = text.partition("LINES: dict")
    body = rest[rest.index("{\n") + 2:rest.index("\n}")]
    path.write_text(text.replace(body, "\n".join(rows)))


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    measured: dict[str, list[dict[str, object]]] = {}
    for line, revision in RELEASES.items():
        path = DATA / f"{line}.jsonl"
        if "--reuse" in sys.argv and path.exists():
            facts = [json.loads(row) for row in path.read_text().splitlines()]
        else:
            facts = measure_release(revision)
            path.write_text("".join(json.dumps(fact, sort_keys=True) + "\n" for fact in facts))
        measured[line] = facts
        print(f"{line} ({revision}): {len(facts)} flags -> {path.relative_to(ROOT)}")
    write_lines()
    per_plugin, extras, unowned = line_facts(measured)
    add_derived_key_lines(per_plugin)
    write_plugin_facts(per_plugin, extras)
    for line, options in unowned:
        print(f"no plugin declares {line}'s {' / '.join(options)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2])))
    else:
        main()
