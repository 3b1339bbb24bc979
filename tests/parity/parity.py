"""Run the shared Megatron parity cases through megaplug and compare, key by key.

Usable as a module by the tests and as a script for a report:

    python tests/parity/parity.py [--verbose] [--plugin=NAME ...] [NAME_SUBSTRING ...]
"""

from __future__ import annotations

import glob
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PARITY_DIR = Path(os.environ.get("MEGAPLUG_PARITY_DIR",
                                 Path(__file__).resolve().parents[3] / "shared" / "parity"))
SEED_ONLY = Path(PARITY_DIR).parent / "megatron" / "seed_only_flags.txt"


def case_files() -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(PARITY_DIR / "cases" / "*.json"))) + sorted(
        Path(p) for p in glob.glob(str(PARITY_DIR / "mutations" / "*.json")))


def target_for(case: dict[str, Any]):
    from megaplug import TargetEnvironment

    assume = case.get("assume") or {}
    capability = assume.get("device_capability")
    return TargetEnvironment(
        packages=dict(assume.get("packages") or {}),
        device_capability=tuple(capability) if capability else None,
        environ=dict(case.get("env") or {}),
    )


def _equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected is actual or (type(expected) is type(actual) and expected == actual)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return math.isclose(expected, actual, rel_tol=0, abs_tol=0) or expected == actual
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(_equal(e, a) for e, a in zip(expected, actual))
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(_equal(expected[k], actual[k])
                                                        for k in expected)
    return expected == actual


@dataclass
class Outcome:
    name: str
    expect: str
    ok: bool
    mismatches: list[str] = field(default_factory=list)
    error: str = ""


FEATURE_PLUGINS = {"moe", "mla", "fsdp", "gtp", "inference", "rl", "distillation", "kitchen",
                   "preflight"}


def third_party_blocks() -> list[str]:
    """``-p no:NAME`` for installed plugins that are not megaplug's own (e.g. the LoRA
    example): Megatron's namespace has no keys for them."""
    from megaplug._discovery import entry_points

    blocks = []
    for entry_point in entry_points():
        if entry_point.name not in FEATURE_PLUGINS:
            blocks += ["-p", f"no:{entry_point.name}"]
    return blocks


def seed_only_dests() -> set[str]:
    """Dests of the flags only the newer seed has: the only extra keys megaplug may have."""
    from megaplug import load

    table = load(third_party_blocks())[0].table
    options = [line.strip() for line in SEED_ONLY.read_text().split() if line.startswith("--")]
    return {table.by_option[o].dest for o in options if o in table.by_option}


def run_case(path: Path) -> Outcome:
    from megaplug import ConfigError
    from megaplug._values import encode
    from megaplug.megatron import parse_and_validate_args

    case = json.loads(path.read_text())
    name = path.stem
    try:
        args = parse_and_validate_args(
            argv=[*third_party_blocks(), *case["argv"]], environ=dict(case.get("env") or {}),
            args_defaults=case.get("args_defaults") or {}, target=target_for(case))
    except ConfigError as exc:
        if case["expect"] == "error":
            return Outcome(name, "error", True, error=str(exc))
        return Outcome(name, "ok", False, [f"rejected: {exc}"], str(exc))
    if case["expect"] == "error":
        return Outcome(name, "error", False,
                       [f"accepted, but Megatron rejected it: {case.get('megatron_error')}"])
    actual = {k: encode(v) for k, v in vars(args).items() if not k.startswith("_")}
    mismatches = []
    for key, expected in case["namespace"].items():
        if key.startswith("_"):
            continue
        if key not in actual:
            mismatches.append(f"{key}: missing (expected {expected!r})")
        elif not _equal(expected, actual[key]):
            mismatches.append(f"{key}: expected {expected!r}, got {actual[key]!r}")
    for key in sorted(set(actual) - set(case["namespace"]) - seed_only_dests()):
        mismatches.append(f"{key}: extra key (value {actual[key]!r})")
    return Outcome(name, "ok", not mismatches, mismatches)


def run_case_for_plugins(path: Path, plugins: set[str]) -> Outcome:
    """Compare only the keys the named plugins own, ignoring other plugins' problems.

    A development aid while plugins are being written: unknown flags are ignored and
    problems reported by other plugins do not count.
    """
    from megaplug import ConfigError, load
    from megaplug._values import encode

    case = json.loads(path.read_text())
    env = dict(case.get("env") or {})
    kernel, rest = load([*third_party_blocks(), *case["argv"]], environ=env)
    draft, sink = kernel.parse(rest, environ=env, target=target_for(case),
                               defaults=case.get("args_defaults") or {}, ignore_unknown=True)
    problems = []
    try:
        kernel.finish(draft, sink)
    except ConfigError as exc:
        problems = [p for p in exc.problems if p.plugin in plugins]
    name = path.stem
    if case["expect"] == "error":
        return Outcome(name, "error", True, [f"(ours) {p}" for p in problems]
                       + [f"(megatron) {case.get('megatron_error')}"])
    mismatches = [f"rejected: {p}" for p in problems]
    for key, expected in case["namespace"].items():
        owner = kernel.table.owner(key)
        if owner not in plugins:
            continue
        if key not in draft:
            mismatches.append(f"{key}: missing (expected {expected!r})")
        elif not _equal(expected, encode(draft[key])):
            mismatches.append(f"{key}: expected {expected!r}, got {encode(draft[key])!r}")
    return Outcome(name, "ok", not mismatches, mismatches)


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    plugins = {a.split("=", 1)[1] for a in argv if a.startswith("--plugin=")}
    filters = [a for a in argv if not a.startswith("--")]
    if plugins:
        outcomes = [run_case_for_plugins(p, plugins) for p in case_files()
                    if not filters or any(f in p.stem for f in filters)]
        for outcome in outcomes:
            if outcome.mismatches and (not outcome.ok or verbose):
                print(f"{'PASS' if outcome.ok else 'FAIL'} {outcome.name} "
                      f"(expect {outcome.expect})")
                for line in outcome.mismatches:
                    print("    " + line)
        print(f"{sum(o.ok for o in outcomes)}/{len(outcomes)} cases match on the keys of "
              f"{', '.join(sorted(plugins))}")
        return 0
    outcomes = [run_case(p) for p in case_files()
                if not filters or any(f in p.stem for f in filters)]
    for outcome in outcomes:
        if not outcome.ok or verbose:
            print(f"{'PASS' if outcome.ok else 'FAIL'} {outcome.name} (expect {outcome.expect})")
            for line in outcome.mismatches[: None if verbose else 25]:
                print("    " + line)
            if verbose and outcome.error:
                print("    " + outcome.error.replace("\n", "\n    "))
    passed = sum(o.ok for o in outcomes)
    print(f"{passed}/{len(outcomes)} parity cases match")
    return 0 if passed == len(outcomes) else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    raise SystemExit(main(sys.argv[1:]))
