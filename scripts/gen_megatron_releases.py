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
    if isinstance(value, (list, tuple)):
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


def main() -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    for line, revision in RELEASES.items():
        facts = measure_release(revision)
        path = DATA / f"{line}.jsonl"
        path.write_text("".join(json.dumps(fact, sort_keys=True) + "\n" for fact in facts))
        print(f"{line} ({revision}): {len(facts)} flags -> {path.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        print(json.dumps(measure(sys.argv[2])))
    else:
        main()
