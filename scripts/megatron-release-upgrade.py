"""`megaplug upgrade` between two releases, judged by the releases' own namespaces.

Two steps. In a release's environment (``scripts/megatron-release-compare.sh``'s: the
release's source first on ``PYTHONPATH``, the tier's Python), ``--dump VERSION FILE`` writes
the release's own ``parse_args`` + ``validate_args`` namespace for every shared parity
configuration it accepts (each value as ``repr`` and type). Then, with megaplug installed,
``--judge OLD.json NEW.json`` runs ``megaplug upgrade --from OLD --to NEW --format json``
on every configuration both releases accept, and counts the real changed settings (a key
whose value or type differs between the two namespaces, or that one of them lacks) that
the report names (``values``, ``removed_settings``, ``new_settings``), and the ones it
names that did not change (invented). Each launch is given as its configuration describes it:
its environment variables, ``--assume`` (Transformer Engine, the GPU's capability) and
``--defaults`` (the entry script's ``args_defaults``). A configuration the old release
accepts and the new one refuses is a refusal; the report names it when its ``rejected`` or
``flags`` (a flag the target removed) is not empty.

    bash scripts/megatron-release-env.sh ...   # see megatron-release-compare.sh
    python scripts/megatron-release-upgrade.py --dump 0.17.0 /tmp/up-0.17.0.json
    python scripts/megatron-release-upgrade.py --judge /tmp/up-0.17.0.json /tmp/up-0.19.0.json

``--dump VERSION FILE CASES`` takes the configurations of a cases file of
``scripts/megatron-release-mutations.py`` instead (``scripts/megatron-release-mutations.json``:
launches some release accepts and another refuses, the refusals ``upgrade`` must report).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PARITY = ROOT.parent / "shared" / "parity"


def _script(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name.replace("-", "_"),
                                                  ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _configurations(compare: Any, cases: Path | None) -> list[tuple[str, dict[str, Any]]]:
    """The parity configurations the release's parser accepts, or those of a
    ``megatron-release-mutations.py`` cases file (its mutations, a release's functional
    tests) whose flags the release has."""
    if cases is None:
        return compare.accepted_cases(PARITY)
    options = compare._release_options()
    return [(case["name"], case) for case in
            _script("megatron-release-mutations").configurations(cases)
            if compare._accepts(case, options)]


def dump(version: str, out: Path, cases: Path | None = None) -> None:
    os.environ.setdefault("MEGAPLUG_PARITY_DIR", str(PARITY))
    warnings.simplefilter("ignore")
    compare = _script("megatron-release-compare")
    compare._no_jit_extensions()
    namespaces: dict[str, Any] = {}
    refused: dict[str, Any] = {}
    for name, case in _configurations(compare, cases):
        launch = {key: case.get(key) or {} for key in ("env", "assume", "args_defaults")}
        try:
            args = compare._release_args(case)
        except BaseException as why:  # the release refuses it
            refused[name] = {"argv": case["argv"], **launch, "why": repr(why)[:300]}
            continue
        namespaces[name] = {"argv": case["argv"], **launch, "values": {
            key: [repr(value), f"{type(value).__module__}.{type(value).__qualname__}"]
            for key, value in sorted(vars(args).items()) if not key.startswith("_")}}
    out.write_text(json.dumps({"version": version, "cases": namespaces, "refused": refused}))
    print(f"{version}: {len(namespaces)} configurations, {len(refused)} refused")


def _report(old: dict[str, Any], new: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """``megaplug upgrade --format json`` for one configuration, launched as it describes."""
    assume = case.get("assume") or {}
    words = [f"--assume={name}={version}"
             for name, version in (assume.get("packages") or {}).items()]
    if assume.get("device_capability"):
        words.append("--assume-device-capability="
                     + ".".join(map(str, assume["device_capability"])))
    if case.get("args_defaults"):
        words.append("--defaults=" + json.dumps(case["args_defaults"]))
    done = subprocess.run(
        [sys.executable, "-m", "megaplug", "upgrade", "--from", old["version"], "--to",
         new["version"], *words, "--format", "json", "--", *case["argv"]],
        capture_output=True, text=True, env={**os.environ, **(case.get("env") or {})})
    return json.loads(done.stdout)


def judge(old_path: Path, new_path: Path) -> None:
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    real = found = invented = 0
    missed: dict[str, int] = {}
    for name in sorted(set(old["cases"]) & set(new["cases"])):
        before, after = old["cases"][name]["values"], new["cases"][name]["values"]
        changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
        report = _report(old, new, old["cases"][name])
        named = {entry["setting"] for kind in ("values", "removed_settings", "new_settings")
                 for entry in report[kind]}
        real += len(changed)
        found += len(changed & named)
        invented += len(named - changed)
        for key in changed - named:
            missed[key] = missed.get(key, 0) + 1
    refusals = sorted(set(old["cases"]) & set(new.get("refused", {})))
    unreported = [name for name in refusals if not _names_a_refusal(
        _report(old, new, old["cases"][name]))]
    print(f"{old['version']} -> {new['version']}: {found} of {real} real changed settings "
          f"reported, {invented} reported that did not change, over "
          f"{len(set(old['cases']) & set(new['cases']))} configurations; "
          f"{len(refusals) - len(unreported)} of {len(refusals)} refusals reported")
    for name in unreported:
        print(f"  refusal not reported: {name}: {new['refused'][name]['why']}")
    for key, count in sorted(missed.items(), key=lambda item: -item[1])[:15]:
        print(f"  missed {count:4}  {key}")



def _names_a_refusal(report: dict[str, Any]) -> bool:
    """Whether an upgrade report says the target refuses the launch (a problem, or a flag
    the target removed, which it refuses as unrecognized)."""
    return bool(report["rejected"] or report["flags"])


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dump"]:
        dump(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]) if sys.argv[4:5] else None)
    elif sys.argv[1:2] == ["--judge"]:
        judge(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
