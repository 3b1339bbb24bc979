"""Mutation configurations for the rules that differ between Megatron releases, against a
release's own parse_args + validate_args (docs/megatron-release-rules.md).

Run by ``scripts/megatron-release-mutations.sh TAG`` (the tag's source first on
``PYTHONPATH``, the Megatron tier's Python, as ``megatron-release-compare.sh``). Each
configuration of ``scripts/megatron-release-mutations.json`` is one small launch (a common
base plus the flags of one rule) that some release accepts and another refuses, or that
resolves to different values in different releases. For each one the release has the flags
of, the release's namespace is compared with megaplug's at that release (as the compare
script does), and a configuration the release refuses must be refused by megaplug too.
Prints one line per configuration and ``N of M agree``; exit status 1 when any disagrees.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "scripts" / "megatron-release-mutations.json"


def _compare_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "megatron_release_compare", ROOT / "scripts" / "megatron-release-compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def configurations(path: Path) -> list[dict[str, Any]]:
    """The cases of ``path``: the base launch, each case's flags and environment added."""
    data = json.loads(path.read_text())
    base = data["base"]
    found = []
    for name, case in data["cases"].items():
        drop = set(case.get("drop", ()))  # switches of the base this case leaves out
        argv = [token for token in base["argv"] if token not in drop]
        found.append({"name": name, "argv": [*argv, *case["argv"]],
                      "env": {**base["env"], **case.get("env", {})},
                      "assume": case.get("assume", base["assume"]), "expect": "ok",
                      "args_defaults": case.get("args_defaults", {}),
                      "rule": case.get("rule", "")})
    return found


def check(case: dict[str, Any], version: str, compare: Any) -> tuple[str, str]:
    """(verdict, detail): ``identical``, ``refused by both``, or a disagreement."""
    with contextlib.redirect_stderr(io.StringIO()):  # the release's argparse usage text
        result = compare.compare_case(case, version)
    if "release_rejects" not in result:
        differences = result["differences"]
        return ("identical", "") if not differences else ("DIFFERS", "; ".join(differences))
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            compare._megaplug_args(case, version)
    except BaseException:  # noqa: BLE001  (a ConfigError, or argparse's exit)
        return "refused by both", ""
    return "ACCEPTED ONLY BY MEGAPLUG", result["release_rejects"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the release's megatron-core version, e.g. 0.15.3")
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("-k", dest="only", help="only cases whose name contains this")
    options = parser.parse_args()
    warnings.simplefilter("ignore")
    compare = _compare_module()
    compare._no_jit_extensions()
    known = compare._release_options()
    verdicts: dict[str, int] = {}
    for case in configurations(options.cases):
        if options.only and options.only not in case["name"]:
            continue
        if not compare._accepts(case, known):
            print(f"  (flags not in this release)  {case['name']}")
            continue
        verdict, detail = check(case, options.version, compare)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        print(f"  {verdict:<26} {case['name']}" + (f"\n      {detail[:400]}" if detail else ""))
    agree = verdicts.get("identical", 0) + verdicts.get("refused by both", 0)
    accepted = verdicts.get("identical", 0) + verdicts.get("DIFFERS", 0)
    print(f"\n{options.version}: the release accepts {accepted}, identical "
          f"{verdicts.get('identical', 0)}; it refuses "
          f"{sum(verdicts.values()) - accepted}, megaplug too "
          f"{verdicts.get('refused by both', 0)}")
    print(f"{options.version}: {agree} of {sum(verdicts.values())} agree")
    return 0 if agree == sum(verdicts.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
