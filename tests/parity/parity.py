"""Run the shared Megatron parity cases through megaplug and compare, key by key.

Usable as a module by the tests and as a script for a report:

    python tests/parity/parity.py [--verbose] [--plugin=NAME ...] [NAME_SUBSTRING ...]
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import re
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
    problems: tuple = ()


FEATURE_PLUGINS = {"moe", "mla", "fsdp", "gtp", "inference", "rl", "distillation", "kitchen",
                   "preflight"}


def third_party_blocks() -> list[str]:
    """``-p no:NAME`` for installed plugins that are not megaplug's own (e.g. the LoRA
    example): Megatron's namespace has no keys for them."""
    from megaplug.cache._entry_points import entry_points

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


#: Words Megatron's messages use for a part of a setting's name.
_SPOKEN = {"number of": "num"}
_LONGEST_NAME = 8  # words in the longest setting name (num_layers_per_virtual_pipeline_stage)


def _normal(name: str) -> str:
    """A flag, dest or environment variable as one comparable name: ``--num-experts``,
    ``num_experts`` and ``NUM_EXPERTS`` are all ``num_experts``."""
    return name.lstrip("-").replace("-", "_").lower()


def concerned_names(megatron_error: str) -> set[str]:
    """The settings Megatron's error message (or failing ``assert`` line) is about, found by
    rule (from an assertion without a message, its failing line): every ``--flag`` and
    ``args.name``, every identifier with an underscore (such as
    ``CUDA_DEVICE_MAX_CONNECTIONS``), and every run of words that spells a real setting
    (``expert model parallel_size`` -> ``expert_model_parallel_size``, ``Number of experts``
    -> ``num_experts``), the longest spelling only (not ``model_parallel_size`` inside it)."""
    # an assert without a message: only its failing line speaks of settings
    text = megatron_error.lower().rpartition(": assert ")[2]
    for spoken, name in _SPOKEN.items():
        text = text.replace(spoken, name)
    names = {_normal(m) for m in re.findall(r"--[a-z0-9][a-z0-9-]*", text)}
    names |= set(re.findall(r"args\.([a-z0-9_]+)", text))
    words = [w for w in re.split(r"[^a-z0-9_]+", text.replace("-", " ")) if w]
    names |= {w for w in words if "_" in w}
    known = _known_names()
    spelled = {"_".join(words[i:i + size]) for size in range(2, _LONGEST_NAME + 1)
               for i in range(len(words) - size + 1)} & known
    names |= {n for n in spelled if not any(n != m and f"_{n}_" in f"_{m}_" for m in spelled)}
    return names


@functools.lru_cache(maxsize=None)
def _flag_table():
    from megaplug import load

    return load(third_party_blocks())[0].table


def problem_names(problem) -> set[str]:
    """The settings a megaplug problem names, as comparable names: each flag's dest and its
    spelling (an environment variable such as ``WORLD_SIZE`` stands for itself)."""
    table = _flag_table()
    names = set()
    for flag in problem.flags:
        names.add(_normal(flag))
        spec = table.by_option.get(flag)
        if spec is not None:
            names.add(spec.dest)
    return names


def reason_mismatch(case: dict[str, Any], problems) -> str | None:
    """Why megaplug's rejection of an ``error`` case is not for Megatron's reason (``None``
    when some problem names a setting Megatron's error concerns)."""
    concerned = concerned_names(case.get("megatron_error") or "")
    if any(problem_names(p) & concerned for p in problems):
        return None
    return (f"megaplug rejected it, but no problem names a setting of Megatron's error "
            f"{case.get('megatron_error')!r} (settings it concerns: "
            f"{sorted(concerned) or 'none found'}); megaplug's problems: "
            + "; ".join(f"{p} {list(p.flags)}" for p in problems))


@functools.lru_cache(maxsize=None)
def _known_names() -> frozenset[str]:
    table = _flag_table()
    return frozenset({spec.dest for spec in table} | {_normal(o) for o in table.by_option}
                     | {_normal(e) for e in table.by_env})


def run_case(path: Path) -> Outcome:
    from megaplug import ConfigError
    from megaplug.values._encoding import encode
    from megaplug.megatron import parse_and_validate_args

    case = json.loads(path.read_text())
    name = path.stem
    try:
        args = parse_and_validate_args(
            argv=[*third_party_blocks(), *case["argv"]], environ=dict(case.get("env") or {}),
            args_defaults=case.get("args_defaults") or {}, target=target_for(case),
            print_arguments=False)  # a report of 154 cases, not 154 argument tables
    except ConfigError as exc:
        if case["expect"] == "error":
            return Outcome(name, "error", True, error=str(exc), problems=exc.problems)
        return Outcome(name, "ok", False, [f"rejected: {exc}"], str(exc), exc.problems)
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
    from megaplug.values._encoding import encode

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


def selected_cases(filters: list[str]) -> list[Path]:
    """The case files whose name contains one of ``filters`` (every case without filters)."""
    return [p for p in case_files() if not filters or any(f in p.stem for f in filters)]


def no_cases_message(filters: list[str]) -> str:
    """Why a run found nothing to compare: a report of 0/0 would read as a pass."""
    if not case_files():
        return (f"parity: no parity cases under {PARITY_DIR} (the shared Megatron cases live in "
                "../shared/parity beside the checkout; MEGAPLUG_PARITY_DIR names another folder)")
    return f"parity: no parity case name contains {' or '.join(map(repr, filters))}"


def main(argv: list[str]) -> int:
    verbose = "--verbose" in argv
    plugins = {a.split("=", 1)[1] for a in argv if a.startswith("--plugin=")}
    filters = [a for a in argv if not a.startswith("--")]
    cases = selected_cases(filters)
    if not cases:
        print(no_cases_message(filters), file=sys.stderr)
        return 2
    if plugins:
        outcomes = [run_case_for_plugins(p, plugins) for p in cases]
        for outcome in outcomes:
            if outcome.mismatches and (not outcome.ok or verbose):
                print(f"{'PASS' if outcome.ok else 'FAIL'} {outcome.name} "
                      f"(expect {outcome.expect})")
                for line in outcome.mismatches:
                    print("    " + line)
        passed = sum(o.ok for o in outcomes)
        print(f"{passed}/{len(outcomes)} cases match on the keys of {', '.join(sorted(plugins))}")
        return 0 if passed == len(outcomes) else 1
    outcomes = [run_case(p) for p in cases]
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
