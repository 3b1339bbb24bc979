"""Measure every published megatron-core release and write megaplug's release data (issue 36).

Every release is its own target: each ``core_vX.Y.Z`` tag of Megatron-LM (not the ``rc``
tags), each megatron-core wheel on the package index whose version has no tag, and
Megatron-LM main at the commit megaplug's parity cases come from. For each, this builds the
release's own argparse parser with its own ``add_megatron_arguments`` (in the Megatron tier's
Python 3.12, ``MEGATRON_PYTHON``) and reads every action's facts off it. It writes, as data:

* ``data/megatron-releases/parsers/RELEASE.json`` -- each release's measured parser (the raw
  facts, for the tests and for anyone re-checking them), the first in full and every later
  one as the edits that turn the release before it into it (:func:`read_parser` reads one
  back), so a fact two releases share is stored once;
* ``src/megaplug/environment/megatron_releases.json`` -- the releases, oldest first, with the
  version each reports and what was measured for it;
* each plugin package's ``megatron_releases.json`` (package data, beside its options module)
  -- for the flags that plugin owns, the releases that have each flag, every fact some
  release states differently (as ranges of releases), the flags the plugin has only in some
  releases, and the settings a release names differently (``renamed``), found here from
  the releases' parsers, not at run time.

Adding a release is running this script (it finds new tags in the mirror and new wheels on
the package index itself) and reviewing the diff: docs/megatron-compat.md, "Adding a release".

    python scripts/gen_megatron_releases.py            # find, measure what is new, write
    python scripts/gen_megatron_releases.py --reuse    # rewrite the data from the stored parsers
"""

from __future__ import annotations

import argparse
import difflib
import enum
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import types
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIRROR = Path(os.environ.get("MEGATRON_LM_GIT", "/work/.mirror/NVIDIA+Megatron-LM/repo"))
MEGATRON_PYTHON = os.environ.get(
    "MEGATRON_PYTHON", str(Path.home() / ".cache/megaplug/megatron-core-0.19.2-py312/bin/python"))
PIP_PYTHON = os.environ.get("PIP_PYTHON", str(Path.home() / ".pyenv/versions/3.12.1/bin/python"))
DATA = ROOT / "data" / "megatron-releases"
PARSERS = DATA / "parsers"
RELEASE_LIST = ROOT / "src" / "megaplug" / "environment" / "megatron_releases.json"
SHARED = ROOT.parent / "shared" / "megatron"

#: The oldest minor megaplug targets; older releases are refused.
OLDEST = (0, 13)
#: Megatron-LM main: the commit the parity cases come from (its package_info says 0.20.0).
MAIN = ("main", "d98e8a64dd")
#: The release megaplug's own flags describe: main plus the seed's newer flags.
SEED = "seed"
#: Facts compared between releases (help text and metavars are not facts megaplug keeps).
FACTS = ("option_strings", "action", "type", "default", "choices", "nargs", "const")


# -- which releases there are -------------------------------------------------------------

def _version(text: str) -> tuple[int, int, int] | None:
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in match.groups()) if match else None  # type: ignore


def discover() -> dict[str, str]:
    """Every published release from :data:`OLDEST` on, oldest first: label -> what is
    measured for it (``tag core_vX.Y.Z``, ``wheel megatron-core==X.Y.Z``, ``commit C``)."""
    tags = subprocess.run(["git", f"--git-dir={MIRROR}", "tag", "--list", "core_v*"],
                          check=True, capture_output=True, text=True).stdout.split()
    found = {tag.removeprefix("core_v"): f"tag {tag}" for tag in tags
             if (_version(tag.removeprefix("core_v")) or (0, 0))[:2] >= OLDEST}
    for version in _index_versions():
        numbers = _version(version)
        if numbers and numbers[:2] >= OLDEST and version not in found:
            found[version] = f"wheel megatron-core=={version}"
    releases = dict(sorted(found.items(), key=lambda item: _version(item[0])))
    releases[MAIN[0]] = f"commit {MAIN[1]}"
    return releases


def _index_versions() -> list[str]:
    """The megatron-core versions on the package index (``pip index versions``)."""
    done = subprocess.run([PIP_PYTHON, "-m", "pip", "index", "versions", "megatron-core"],
                          capture_output=True, text=True)
    line = next((row for row in done.stdout.splitlines()
                 if row.startswith("Available versions:")), None)
    if done.returncode or line is None:
        raise SystemExit(f"pip index versions megatron-core failed:\n{done.stderr[-2000:]}")
    return [version.strip() for version in line.partition(":")[2].split(",")]


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


# -- driving the measurements -------------------------------------------------------------

def release_source(source: str, tree: Path) -> None:
    """Put the release's ``megatron`` package under ``tree``: from its tag or commit in the
    Megatron-LM mirror, or from its wheel on the package index."""
    kind, _, name = source.partition(" ")
    if kind in ("tag", "commit"):
        archive = subprocess.run(["git", f"--git-dir={MIRROR}", "archive", name, "megatron"],
                                 check=True, capture_output=True).stdout
        archive_path = tree / "megatron.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tree, filter="data")
    elif kind == "wheel":
        subprocess.run([PIP_PYTHON, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--only-binary", ":all:", name, "-d", str(tree / "wheel")], check=True)
        wheel = next((tree / "wheel").glob("*.whl"))
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tree, [member for member in archive.namelist()
                                      if member.startswith("megatron/")])
    else:
        raise SystemExit(f"cannot measure {source!r}")


def measure_release(source: str) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory(prefix="megatron-release-") as tree:
        release_source(source, Path(tree))
        done = subprocess.run([MEGATRON_PYTHON, __file__, "--measure", tree],
                              capture_output=True, text=True, cwd=tree)
        if done.returncode:
            raise SystemExit(f"measuring {source} failed:\n{done.stderr[-3000:]}")
        for line in done.stderr.splitlines():
            if line.startswith("stubbed "):
                print(f"  {source}: {line}")
        return json.loads(done.stdout.strip().splitlines()[-1])


# -- the measured parsers, each stored as edits of the one before -------------------------

def _key(fact: dict[str, object]) -> str:
    return " ".join([str(fact["dest"]), *fact["option_strings"]])  # type: ignore[misc]


def parser_edits(before: list[dict], after: list[dict]) -> list[dict[str, object]]:
    """The edits turning ``before`` into ``after``: ``{"keep": n}``, ``{"drop": [keys]}``,
    ``{"add": [facts]}`` and ``{"set": fact}`` (the same flag, other facts)."""
    old, new = [_key(f) for f in before], [_key(f) for f in after]
    edits: list[dict[str, object]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False) \
            .get_opcodes():
        if tag == "equal":
            for offset in range(i2 - i1):
                if before[i1 + offset] == after[j1 + offset]:
                    if edits and "keep" in edits[-1]:
                        edits[-1]["keep"] += 1  # type: ignore[operator]
                    else:
                        edits.append({"keep": 1})
                else:
                    edits.append({"set": after[j1 + offset]})
            continue
        if i2 > i1:
            edits.append({"drop": old[i1:i2]})
        if j2 > j1:
            edits.append({"add": after[j1:j2]})
    return edits


def apply_edits(before: list[dict], edits: list[dict[str, object]]) -> list[dict]:
    """The parser :func:`parser_edits` described (``ValueError`` where they do not fit)."""
    after, at = [], 0
    for edit in edits:
        if "keep" in edit:
            after += before[at:at + edit["keep"]]  # type: ignore[operator]
            at += edit["keep"]  # type: ignore[operator]
        elif "drop" in edit:
            for key in edit["drop"]:  # type: ignore[union-attr]
                if _key(before[at]) != key:
                    raise ValueError(f"edit drops {key}, found {_key(before[at])}")
                at += 1
        elif "add" in edit:
            after += edit["add"]  # type: ignore[arg-type]
        else:
            if _key(before[at]) != _key(edit["set"]):  # type: ignore[arg-type]
                raise ValueError(f"edit sets {_key(edit['set'])}, found {_key(before[at])}")
            after.append(edit["set"])
            at += 1
    if at != len(before):
        raise ValueError(f"edits cover {at} of {len(before)} flags")
    return after


def read_parser(release: str, directory: Path = PARSERS) -> list[dict[str, object]]:
    """One release's measured parser, every action's facts in declaration order."""
    stored = json.loads((directory / f"{release}.json").read_text())
    if stored.get("based_on") is None:
        return stored["flags"]
    return apply_edits(read_parser(stored["based_on"], directory), stored["edits"])


def write_parsers(releases: dict[str, str], measured: dict[str, list[dict]]) -> None:
    PARSERS.mkdir(parents=True, exist_ok=True)
    previous = None
    for release, source in releases.items():
        row: dict[str, object] = {"release": release, "measured": source, "based_on": previous}
        if previous is None:
            row["flags"] = measured[release]
        else:
            row["edits"] = parser_edits(measured[previous], measured[release])
        (PARSERS / f"{release}.json").write_text(_one_fact_a_line(row))
        if read_parser(release) != measured[release]:
            raise SystemExit(f"{release}: stored edits do not give back the measured parser")
        previous = release
    for stale in PARSERS.glob("*.json"):
        if stale.stem not in releases:
            stale.unlink()


def _one_fact_a_line(row: dict[str, object]) -> str:
    """JSON with one fact or edit a line, so that a new release's diff reads flag by flag."""
    items = row.get("flags", row.get("edits"))
    head = {key: value for key, value in row.items() if key not in ("flags", "edits")}
    name = "flags" if "flags" in row else "edits"
    lines = [json.dumps(head)[:-1] + f', "{name}": [']
    lines += [json.dumps(item, sort_keys=True) + "," for item in items]  # type: ignore
    if len(lines) > 1:
        lines[-1] = lines[-1][:-1]
    return "\n".join(lines) + "\n]}\n"


# -- megaplug's side ----------------------------------------------------------------------

_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false", "BooleanOptionalAction": "boolean_optional",
            "_StoreConstAction": "store_const", "_AppendAction": "append", "_CountAction": "count"}
#: The plugins that carry Megatron's own flags, and ``kitchen``, whose two flags releases
#: before 0.16 declare whether or not the kitchen package is installed.
MEGATRON_PLUGINS = ("model", "parallel", "precision", "training", "checkpointing", "data",
                    "logging", "resilience", "experimental", "moe", "mla", "fsdp", "gtp",
                    "inference", "rl", "distillation", "kitchen")
KITCHEN = "kitchen"


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


def kernel(release: str) -> object:
    """megaplug's kernel at ``release``, declared here (never the stored table), with the
    kitchen plugin's flags whether or not its package is installed."""
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection

    return Kernel(PluginSet(PluginSelection.from_environment({})),
                  lines={"megatron_core": release})


def full_table() -> object:
    """Every flag megaplug's plugins declare, in any release (no release's facts applied)."""
    return kernel("(every release)").table


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
    # releases before 0.16 declare them whether or not kitchen is installed, later ones only
    # with it: the kitchen plugin's extra flags, which those releases have without it
    ("--kitchen-config-file", "kitchen"), ("--kitchen-recipe-number", "kitchen"),
)


def _owner(options: list[str]) -> str | None:
    return next((plugin for prefix, plugin in OWNERS_BY_PREFIX if options[0].startswith(prefix)),
                None)


def _extra_fact(fact: dict[str, object]) -> dict[str, object]:
    """A measured flag as a plugin's ``extra`` declares it (releases added by the caller)."""
    theirs = measured_facts(fact)
    kind = fact["type"] if fact["type"] in ("int", "float", "str", "bool") else None
    return {"option_strings": theirs["option_strings"], "dest": theirs["dest"],
            "action": theirs["action"], "type": kind, "default": fact["default"],
            "choices": fact["choices"], "nargs": theirs["nargs"] or None,
            "const": fact["const"]}


#: The types a release's facts may state (``type=`` a builtin, or none: text).
PLAIN_TYPES = {"int", "float", "str", "bool", None}


def _plain_type(name: str | None) -> str | None:
    """A measured or declared type's name as a release's facts state it; anything but a
    builtin's is ``"custom"`` (a converter of megaplug's own, never restated)."""
    return name if name in PLAIN_TYPES else "custom"


class Ranges:
    """Releases in release order, written as inclusive ``[first, last]`` runs."""

    def __init__(self, order: list[str]) -> None:
        self.order = order

    def of(self, releases: list[str]) -> list[list[str]]:
        runs: list[list[str]] = []
        places = sorted(self.order.index(release) for release in releases)
        for place in places:
            if runs and self.order.index(runs[-1][1]) == place - 1:
                runs[-1][1] = self.order[place]
            else:
                runs.append([self.order[place], self.order[place]])
        return runs

    def values(self, by_release: dict[str, object]) -> list[list[object]]:
        """``{release: value}`` as ``[first, last, value]`` runs of equal values."""
        runs: list[list[object]] = []
        for release in sorted(by_release, key=self.order.index):
            value = by_release[release]
            if runs and runs[-1][2] == value and \
                    self.order.index(runs[-1][1]) == self.order.index(release) - 1:  # type: ignore
                runs[-1][1] = release
            else:
                runs.append([release, release, value])
        return runs


def plugin_facts(measured: dict[str, list[dict[str, object]]], order: list[str]
                 ) -> tuple[dict, dict, list]:
    """Per plugin: per flag (its first option string) the releases that have it and the facts
    that differ, and the flags it has only in some releases; and the measured flags no
    plugin can be given."""
    seed_only = {line.strip() for line in (SHARED / "seed_only_flags.txt").read_text().split()}
    ranges = Ranges(order)
    table = full_table()
    claimed: set[tuple[str, str]] = set()
    per_plugin: dict[str, dict[str, dict[str, object]]] = {}
    extras: dict[str, dict[str, list[str]]] = {}  # plugin -> encoded extra -> its releases

    def add_extra(plugin: str, release: str, fact: dict[str, object]) -> None:
        encoded = json.dumps(_extra_fact(fact), sort_keys=True)
        extras.setdefault(plugin, {}).setdefault(encoded, []).append(release)
        claimed.update((release, option) for option in fact["option_strings"])

    for spec in table:
        if spec.kind != "flag" or spec.plugin not in MEGATRON_PLUGINS or spec.plugin == KITCHEN:
            continue  # (kitchen's flags: always its extra flags, below)
        ours = megaplug_facts(spec)
        stated: dict[str, dict[str, object]] = {}
        present = []
        for release, facts in measured.items():
            by_option = {option: fact for fact in facts for option in fact["option_strings"]}
            fact = next((by_option[o] for o in spec.option_strings if o in by_option), None)
            if fact is None:
                continue
            theirs = measured_facts(fact)
            if theirs["dest"] != ours["dest"]:  # that release's setting is another: its own
                add_extra(spec.plugin, release, fact)
                continue
            present.append(release)
            claimed.update((release, option) for option in fact["option_strings"])
            for field in ("default", "choices", "nargs", "const", "action", "option_strings"):
                if theirs[field] != ours[field]:
                    stated.setdefault(field, {})[release] = theirs[field]
            if _plain_type(fact["type"]) != _plain_type(spec.type_name) and {
                    _plain_type(fact["type"]), _plain_type(spec.type_name)} <= PLAIN_TYPES:
                stated.setdefault("type", {})[release] = _plain_type(fact["type"])
        if "main" in present or any(option in seed_only for option in spec.option_strings):
            present.append(SEED)
        row: dict[str, object] = {}
        if len(present) < len(order):
            row["releases"] = ranges.of(present)
        row.update({field: ranges.values(values) for field, values in sorted(stated.items())})
        if row:
            per_plugin.setdefault(spec.plugin, {})[spec.primary] = row
    unowned = []
    for release, facts in measured.items():
        for fact in facts:
            options = fact["option_strings"]
            if any((release, o) in claimed for o in options):
                continue
            owner = _owner(options)
            if owner is None:
                unowned.append((release, options))
            else:
                add_extra(owner, release, fact)
    return per_plugin, extras, unowned


#: The keys each release's own validate_args adds to the namespace on every parity
#: configuration it accepts, measured by scripts/megatron-release-compare.sh --derived-keys.
DERIVED_KEYS = DATA / "derived-keys.json"


def add_derived_key_releases(per_plugin: dict[str, dict[str, dict[str, object]]],
                             order: list[str]) -> None:
    """A computed setting some releases' validate_args never derives (GTP's remat sizes
    before 0.19, the layer-wise distributed optimizer before 0.18) is present only in the
    releases that derive it, as a flag is only in the releases whose parser has it."""
    derived = json.loads(DERIVED_KEYS.read_text())
    missing = [release for release in order if release != SEED and release not in derived]
    if missing:
        raise SystemExit(f"no derived keys measured for {', '.join(missing)}: run "
                         "scripts/megatron-release-compare.sh TAG --derived-keys "
                         f"{DERIVED_KEYS.relative_to(ROOT)} for each")
    measured = [release for release in order if release != SEED]
    for spec in full_table():
        if spec.kind != "computed" or spec.plugin not in MEGATRON_PLUGINS:
            continue
        present = [release for release in measured if spec.dest in derived[release]]
        if not present or len(present) == len(measured):
            continue  # never derived on every configuration, or derived in every release
        if "main" in present:
            present.append(SEED)
        per_plugin.setdefault(spec.plugin, {})[spec.primary] = {
            "releases": Ranges(order).of(present)}


def _declared_at(flag: dict[str, object], release: str, measured: dict[str, list[dict]],
                 order: list[str]) -> tuple[int, int]:
    """Where ``release``'s parser declares ``flag``: (the release's place from the newest,
    the action's index)."""
    positions = [fact["option_strings"][0] for fact in measured[release]]
    first = flag["option_strings"][0]
    return -order.index(release), positions.index(first) if first in positions else 0


def plugin_directory(plugins: object, plugin: str) -> Path:
    """The directory of the module declaring a plugin's flags (its ``PluginInfo(options=)``),
    where the kernel looks for its release data."""
    import importlib

    reference = plugins.records[plugin].info.options
    module_name = reference.partition(":")[0] if isinstance(reference, str) else (
        reference.__module__)
    return Path(importlib.import_module(module_name).__file__).parent


def plugin_rows(per_plugin: dict, extras: dict, measured: dict[str, list[dict]],
                order: list[str]) -> dict[str, dict[str, object]]:
    """Each plugin's release data (without ``renamed``, which :func:`renamed_settings`
    measures with these applied)."""
    ranges = Ranges(order)
    rows = {}
    for plugin in MEGATRON_PLUGINS:
        flags = [(json.loads(encoded), releases)
                 for encoded, releases in extras.get(plugin, {}).items()]
        # in the order the newest release having it declares it: of two flags of one
        # setting, the first declared gives the default (argparse)
        flags.sort(key=lambda item: (item[0]["dest"],
                                     *_declared_at(item[0], item[1][-1], measured, order)))
        rows[plugin] = {
            "about": f"How the {plugin} plugin's flags differ between megatron-core releases. "
                     "Written by scripts/gen_megatron_releases.py from each release's own "
                     "parser; do not edit by hand (docs/megatron-compat.md).",
            "package": "megatron_core", "releases": order,
            "flags": dict(sorted(per_plugin.get(plugin, {}).items())),
            "extra": [dict(flag, releases=ranges.of(releases)) for flag, releases in flags],
            "renamed": {}}
    return rows


#: Actions a renamed flag may have on both sides: the same, or a switch read the other way
#: round (0.13's ``--disable-mamba-mem-eff-path`` sets ``disable_mamba_mem_eff_path``,
#: megaplug's the inverse ``use_mamba_mem_eff_path``).
_SWITCHES = {"store_true", "store_false"}


def renamed_settings(table: object) -> dict[str, tuple[str, bool]]:
    """The settings of megaplug's newest release that ``table``'s release names
    differently: withheld setting -> (the release's own setting, whether its value reads
    the other way round). A withheld flag one of whose spellings the release gives to
    another setting, of the same kind (both switches, or both taking a value with the same
    arity) -- else the release's setting means something else and is no rename."""
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


def _same_kind(ours: object, theirs: object) -> bool | None:
    """True: the two flags set the same value; False: switches that set opposite values;
    None: not comparable (different actions or arity)."""
    if ours.action in _SWITCHES and theirs.action in _SWITCHES:
        return ours.action == theirs.action
    if ours.action != theirs.action or (ours.nargs is None) != (theirs.nargs is None):
        return None
    return True


def write_plugin_data(rows: dict[str, dict[str, object]]) -> dict[str, Path]:
    plugins = kernel("(every release)").plugins
    paths = {}
    for plugin, row in rows.items():
        path = plugin_directory(plugins, plugin) / "megatron_releases.json"
        if not row["flags"] and not row["extra"] and not row["renamed"]:
            path.unlink(missing_ok=True)
            continue
        path.write_text(_one_flag_a_line(row))
        paths[plugin] = path
    return paths


def _one_flag_a_line(row: dict[str, object]) -> str:
    """The plugin's data with one flag a line, so that a new release's diff reads by flag."""
    out = ["{"]
    for key, value in row.items():
        if isinstance(value, dict) and value:
            out.append(f"  {json.dumps(key)}: {{")
            out += [f"    {json.dumps(name)}: {json.dumps(item)}," for name, item in
                    value.items()]
            out[-1] = out[-1][:-1]
            out.append("  },")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            out.append(f"  {json.dumps(key)}: [")
            out += [f"    {json.dumps(item)}," for item in value]
            out[-1] = out[-1][:-1]
            out.append("  ],")
        else:
            out.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    out[-1] = out[-1][:-1]
    return "\n".join(out) + "\n}\n"


def add_renamed(rows: dict[str, dict[str, object]], order: list[str]) -> None:
    """Each plugin's ``renamed``: per release, the settings it names differently, read off
    megaplug's table at that release (the flags and facts just written)."""
    by_plugin: dict[str, dict[str, dict[tuple[str, bool], list[str]]]] = {}
    for release in order:
        table = kernel(release).table
        for dest, (theirs, inverted) in renamed_settings(table).items():
            plugin = table.withheld[dest][0].plugin
            by_plugin.setdefault(plugin, {}).setdefault(dest, {}).setdefault(
                (theirs, inverted), []).append(release)
    ranges = Ranges(order)
    for plugin, renames in by_plugin.items():
        rows[plugin]["renamed"] = {
            dest: [{"releases": ranges.of(releases), "dest": theirs, "inverted": inverted}
                   for (theirs, inverted), releases in found.items()]
            for dest, found in sorted(renames.items())}


def write_release_list(releases: dict[str, str]) -> None:
    """The releases, oldest first, with the version each reports (main: its package_info)."""
    rows = []
    for release, source in releases.items():
        version = _version(release)
        if version is None:  # main: what its package_info says
            info = subprocess.run(["git", f"--git-dir={MIRROR}", "show",
                                   f"{source.split()[-1]}:megatron/core/package_info.py"],
                                  check=True, capture_output=True, text=True).stdout
            numbers = dict(re.findall(r"^(MAJOR|MINOR|PATCH) = (\d+)", info, re.M))
            version = (int(numbers["MAJOR"]), int(numbers["MINOR"]), int(numbers["PATCH"]))
        rows.append({"release": release, "version": list(version), "measured": source})
    rows.append({"release": SEED, "version": None,
                 "measured": "megaplug's own: main plus the seed's newer flags"})
    body = ",\n".join(f"  {json.dumps(row)}" for row in rows)
    RELEASE_LIST.write_text(
        '{"about": "The megatron-core releases megaplug targets, oldest first. Written by '
        'scripts/gen_megatron_releases.py; do not edit by hand.",\n'
        f' "package": "megatron_core",\n "releases": [\n{body}\n]}}\n')


def _stored_parser(release: str, source: str) -> tuple[str, list[dict]] | None:
    """(what was measured, the parser) as stored for a release; None where none is, or its
    chain of edits no longer reads back (a release before it was measured again)."""
    path = PARSERS / f"{release}.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())["measured"], read_parser(release)
    except (OSError, ValueError, KeyError, IndexError):
        return None


def stored_releases() -> dict[str, str]:
    rows = json.loads(RELEASE_LIST.read_text())["releases"]
    return {row["release"]: row["measured"] for row in rows if row["release"] != SEED}


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--reuse", action="store_true",
                         help="measure nothing: rewrite the data from the stored parsers")
    options.add_argument("--measured", type=Path, metavar="DIR",
                         help="take a release's parser from DIR/RELEASE.jsonl where there")
    options.add_argument("--remeasure", nargs="+", default=[], metavar="RELEASE",
                         help="measure these releases again even where a parser is stored")
    given = options.parse_args()
    releases = stored_releases() if given.reuse else discover()
    measured: dict[str, list[dict[str, object]]] = {}
    for release, source in releases.items():
        raw = given.measured / f"{release}.jsonl" if given.measured else None
        stored = None if release in given.remeasure else _stored_parser(release, source)
        if raw is not None and raw.exists():
            measured[release] = [json.loads(row) for row in raw.read_text().splitlines()]
        elif stored is not None and (given.reuse or stored[0] == source):
            measured[release] = stored[1]
        else:
            print(f"measuring {release} ({source})")
            measured[release] = measure_release(source)
        print(f"{release} ({source}): {len(measured[release])} flags")
    write_parsers(releases, measured)
    write_release_list(releases)
    order = [*releases, SEED]
    per_plugin, extras, unowned = plugin_facts(measured, order)
    add_derived_key_releases(per_plugin, order)
    rows = plugin_rows(per_plugin, extras, measured, order)
    write_plugin_data(rows)
    add_renamed(rows, order)
    for plugin, path in write_plugin_data(rows).items():
        row = rows[plugin]
        print(f"{plugin}: {len(row['flags'])} flags with release facts, {len(row['extra'])} "
              f"extra, {len(row['renamed'])} renamed -> {path.relative_to(ROOT)}")
    for release, flag_options in unowned:
        print(f"no plugin declares {release}'s {' / '.join(flag_options)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2])))
    else:
        main()
