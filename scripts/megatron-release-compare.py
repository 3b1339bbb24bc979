"""One Megatron release's own parse_args + validate_args against megaplug at that release.

Run by ``scripts/megatron-release-compare.sh TAG`` with the release's source first on
``PYTHONPATH`` (0.13-0.16's wheels carry no ``megatron/training``, so the tag's source is used
for every release alike) in the Megatron tier's Python. For every shared parity configuration
(``../shared/parity``, cases and mutations expected to resolve) whose flags the release's
parser has, it compares the release's namespace with megaplug's facade told the release
(``TargetEnvironment(packages={"megatron_core": VERSION})``): the same keys, equal values of
identical types, and the same ``TransformerConfig`` from the release's own
``core_transformer_config_from_args``. It prints one line per configuration that differs and
the per-setting tally, then ``N of M configurations identical``; ``--json FILE`` writes it all.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import functools
import io
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "megatron"))


def _no_jit_extensions() -> None:
    """Some releases build a CUDA extension at import; on a CPU machine that must fail softly."""
    import torch.utils.cpp_extension as cpp_extension

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no CUDA toolchain: extension not built")

    cpp_extension.load_inline = refuse
    cpp_extension.load = refuse


def _release_parser() -> argparse.ArgumentParser:
    from megatron.training.arguments import add_megatron_arguments

    return add_megatron_arguments(argparse.ArgumentParser(add_help=False))


def _release_options() -> set[str]:
    return {option for action in _release_parser()._actions for option in action.option_strings}


@functools.lru_cache(maxsize=None)
def _release_dests() -> frozenset[str]:
    return frozenset(action.dest for action in _release_parser()._actions)


def _default_differences(version: str) -> set[str]:
    """Settings whose declared default megaplug at this release gives differently."""
    from megaplug import load

    import reference

    theirs: dict[str, Any] = {}
    for action in _release_parser()._actions:
        theirs.setdefault(action.dest, action.default)
    table = load(reference.third_party_blocks())[0].table
    return {dest for dest, default in theirs.items()
            if dest in table.by_dest and table.by_dest[dest][0].default != default}


def _accepts(case: dict[str, Any], options: set[str]) -> bool:
    return all(token.split("=", 1)[0] in options for token in case["argv"]
               if token.startswith("--"))


def _release_args(case: dict[str, Any]) -> argparse.Namespace:
    import megatron.training.arguments as arguments
    import reference

    if not hasattr(arguments, "get_device_arch_version"):  # older releases do not ask
        arguments.get_device_arch_version = lambda: 9
    with reference.targeting(case), contextlib.redirect_stdout(io.StringIO()):
        args = arguments.parse_args()
        arguments.validate_args(args, dict(case.get("args_defaults") or {}))
    return args


def _megaplug_args(case: dict[str, Any], version: str) -> argparse.Namespace:
    from megaplug import TargetEnvironment
    from megaplug.megatron import parse_and_validate_args
    import reference

    assume = case.get("assume") or {}
    capability = assume.get("device_capability")
    packages = dict(assume.get("packages") or {})
    packages["megatron_core"] = version
    target = TargetEnvironment(packages=packages,
                               device_capability=tuple(capability) if capability else None)
    with contextlib.redirect_stdout(io.StringIO()):
        return parse_and_validate_args(
            None, args_defaults=dict(case.get("args_defaults") or {}),
            argv=[*reference.third_party_blocks(), *case["argv"]],
            environ=dict(case.get("env") or {}), target=target, register=False)


def _type_name(value: Any) -> str:
    return f"{type(value).__module__}.{type(value).__qualname__}"


def _same(expected: Any, actual: Any) -> bool:
    """Equal, of identical types, down through lists and tuples."""
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, (list, tuple)):
        return len(expected) == len(actual) and all(map(_same, expected, actual))
    if callable(expected) and not isinstance(expected, type):
        return _callable_key(expected) == _callable_key(actual)
    if type(expected).__eq__ is object.__eq__:  # built per call, no equality of its own
        return repr(expected) == repr(actual)
    try:
        return bool(expected == actual)
    except Exception:  # tensors and the like: compare what they print
        return repr(expected) == repr(actual)


def _callable_key(function: Any) -> Any:
    if isinstance(function, functools.partial):
        return (_callable_key(function.func), function.args, function.keywords)
    return getattr(function, "__qualname__", repr(function))


def _namespace_differences(theirs: argparse.Namespace, ours: argparse.Namespace) -> list[str]:
    expected, actual = vars(theirs), vars(ours)
    found = [f"missing {key}" for key in sorted(set(expected) - set(actual))]
    found += [f"extra {key}" for key in sorted(set(actual) - set(expected))]
    for key in sorted(set(expected) & set(actual)):
        if not _same(expected[key], actual[key]):
            found.append(f"value {key}: release {expected[key]!r} ({_type_name(expected[key])}), "
                         f"megaplug {actual[key]!r} ({_type_name(actual[key])})")
    return found


def _config_differences(case: dict[str, Any], theirs: argparse.Namespace,
                        ours: argparse.Namespace) -> list[str]:
    import reference

    try:
        from megatron.training.argument_utils import core_transformer_config_from_args
    except ImportError:
        from megatron.training.arguments import core_transformer_config_from_args

    def build(args: argparse.Namespace) -> Any:
        with reference.targeting(case), warnings.catch_warnings(), \
                contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            try:
                return core_transformer_config_from_args(args)
            except Exception as refused:
                return f"{type(refused).__name__}: {refused}"

    expected, actual = build(theirs), build(ours)
    if isinstance(expected, str) or isinstance(actual, str):
        return [] if expected == actual else [f"config: release {expected!r}, megaplug {actual!r}"]
    if type(expected) is not type(actual):
        return [f"config class: release {type(expected).__name__}, "
                f"megaplug {type(actual).__name__}"]
    return [f"config {field.name}: release {getattr(expected, field.name)!r}, "
            f"megaplug {getattr(actual, field.name)!r}"
            for field in dataclasses.fields(expected)
            if not _same(getattr(expected, field.name), getattr(actual, field.name))]


def compare_case(case: dict[str, Any], version: str) -> dict[str, Any]:
    """One configuration: ``{"release_rejects": why}`` where the release refuses it, else
    ``{"differences": [...], "derived": [...]}`` -- what differs between the release's
    namespace (and TransformerConfig) and megaplug's, and the keys the release's
    validate_args added."""
    try:
        theirs = _release_args(case)
    except BaseException as refused:  # the release rejects it: not valid there
        return {"release_rejects": f"{type(refused).__name__}: {refused}"[:300]}
    derived = sorted(set(vars(theirs)) - _release_dests())
    try:
        ours = _megaplug_args(case, version)
    except BaseException as refused:
        return {"differences": [f"megaplug rejects: {refused}"[:600]], "derived": derived}
    return {"differences": _namespace_differences(theirs, ours)
            + _config_differences(case, theirs, ours), "derived": derived}


def accepted_cases(parity_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """(name, case) of every parity configuration expected to resolve whose flags the
    release's parser has."""
    options = _release_options()
    found = []
    for kind in ("cases", "mutations"):
        for path in sorted((parity_dir / kind).glob("*.json")):
            case = json.loads(path.read_text())
            if case["expect"] == "ok" and _accepts(case, options):
                found.append((f"{kind}/{path.stem}", case))
    return found


def compare(version: str, parity_dir: Path) -> dict[str, Any]:
    """Every parity configuration the release's parser accepts: what differs, per case."""
    derived: collections.Counter[str] = collections.Counter()
    results: dict[str, Any] = {"default_differs": sorted(_default_differences(version)),
                               "derived_keys": derived}
    for name, case in accepted_cases(parity_dir):
        results[name] = compare_case(case, version)
        derived.update(results[name].get("derived", ()))
        if "release_rejects" in results[name]:
            results[name]["megaplug_rejects"] = _megaplug_rejects(case, version)
    return results


def _megaplug_rejects(case: dict[str, Any], version: str) -> bool:
    """Whether megaplug at this release refuses a configuration the release refuses."""
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            _megaplug_args(case, version)
    except BaseException:  # noqa: BLE001  (a ConfigError, or argparse's exit)
        return True
    return False


def _record_derived_keys(path: Path, version: str, keys: list[str]) -> None:
    """Merge this release's always-derived keys into ``path`` under its line (the input of
    scripts/gen_megatron_releases.py for computed settings some lines lack)."""
    from megaplug.environment._releases import line_of

    recorded = json.loads(path.read_text()) if path.exists() else {}
    recorded[line_of(version, "measured").line] = sorted(keys)
    path.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the release's megatron-core version, e.g. 0.15.3")
    parser.add_argument("--parity-dir", type=Path, default=ROOT.parent / "shared" / "parity")
    parser.add_argument("--json", type=Path, help="write every configuration's result here")
    parser.add_argument("--derived-keys", type=Path, metavar="FILE",
                        help="record in FILE (JSON: line -> keys) the keys this release's "
                             "validate_args adds on every configuration it accepts")
    options = parser.parse_args()
    os.environ.setdefault("MEGAPLUG_PARITY_DIR", str(options.parity_dir))
    warnings.simplefilter("ignore")
    _no_jit_extensions()
    results = compare(options.version, options.parity_dir)
    default_differs = set(results.pop("default_differs"))
    derived_keys = dict(sorted(results.pop("derived_keys").items()))
    valid = {name: r for name, r in results.items() if "differences" in r}
    identical = [name for name, r in valid.items() if not r["differences"]]
    tally: collections.Counter[str] = collections.Counter()
    for name, result in sorted(valid.items()):
        if result["differences"]:
            print(f"{name}:")
            for line in result["differences"]:
                print(f"    {line[:300]}")
                key = line.split(":", 1)[0]
                note = " (declared default differs)" if key.split()[-1] in default_differs else ""
                tally[key + note] += 1
    print(f"\nkeys the release's validate_args adds (of {len(valid)} configurations): "
          + ", ".join(f"{key} {count}" for key, count in derived_keys.items()))
    print("\nper setting:")
    for key, count in tally.most_common():
        print(f"  {count:4d}  {key}")
    rejected = len(results) - len(valid)
    also = sum(1 for r in results.values() if r.get("megaplug_rejects"))
    print(f"\n{options.version}: {len(identical)} of {len(valid)} configurations identical "
          f"({rejected} more the release itself rejects, megaplug too {also})")
    if options.derived_keys:
        _record_derived_keys(options.derived_keys, options.version,
                             [key for key, count in derived_keys.items() if count == len(valid)])
    if options.json:
        options.json.write_text(json.dumps({"version": options.version, "results": results,
                                            "default_differs": sorted(default_differs),
                                            "derived_keys": derived_keys},
                                           indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
