"""`megaplug upgrade` between two releases, judged by the releases' own namespaces.

Two steps. In a release's environment (``scripts/megatron-release-compare.sh``'s: the
release's source first on ``PYTHONPATH``, the tier's Python), ``--dump VERSION FILE`` writes
the release's own ``parse_args`` + ``validate_args`` namespace for every shared parity
configuration it accepts (each value as ``repr`` and type). Then, with megaplug installed,
``--judge OLD.json NEW.json`` runs ``megaplug upgrade --from OLD --to NEW --format json``
on every configuration both releases accept, and counts the real changed settings (a key
whose value or type differs between the two namespaces, or that one of them lacks) that
the report names (``values``, ``removed_settings``, ``new_settings``), and the ones it
names that did not change (invented).

    bash scripts/megatron-release-env.sh ...   # see megatron-release-compare.sh
    python scripts/megatron-release-upgrade.py --dump 0.17.0 /tmp/up-0.17.0.json
    python scripts/megatron-release-upgrade.py --judge /tmp/up-0.17.0.json /tmp/up-0.19.0.json
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


def dump(version: str, out: Path) -> None:
    import importlib.util

    os.environ.setdefault("MEGAPLUG_PARITY_DIR", str(PARITY))
    warnings.simplefilter("ignore")
    spec = importlib.util.spec_from_file_location("compare", ROOT / "scripts" /
                                                  "megatron-release-compare.py")
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    compare._no_jit_extensions()
    namespaces: dict[str, Any] = {}
    for name, case in compare.accepted_cases(PARITY):
        try:
            args = compare._release_args(case)
        except BaseException:  # the release refuses it
            continue
        namespaces[name] = {"argv": case["argv"], "values": {
            key: [repr(value), f"{type(value).__module__}.{type(value).__qualname__}"]
            for key, value in sorted(vars(args).items()) if not key.startswith("_")}}
    out.write_text(json.dumps({"version": version, "cases": namespaces}))
    print(f"{version}: {len(namespaces)} configurations")


def judge(old_path: Path, new_path: Path) -> None:
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    real = found = invented = 0
    missed: dict[str, int] = {}
    for name in sorted(set(old["cases"]) & set(new["cases"])):
        before, after = old["cases"][name]["values"], new["cases"][name]["values"]
        changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
        done = subprocess.run(
            [sys.executable, "-m", "megaplug", "upgrade", "--from", old["version"], "--to",
             new["version"], "--format", "json", "--", *old["cases"][name]["argv"]],
            capture_output=True, text=True)
        report = json.loads(done.stdout)
        named = {entry["setting"] for kind in ("values", "removed_settings", "new_settings")
                 for entry in report[kind]}
        real += len(changed)
        found += len(changed & named)
        invented += len(named - changed)
        for key in changed - named:
            missed[key] = missed.get(key, 0) + 1
    print(f"{old['version']} -> {new['version']}: {found} of {real} real changed settings "
          f"reported, {invented} reported that did not change, over "
          f"{len(set(old['cases']) & set(new['cases']))} configurations")
    for key, count in sorted(missed.items(), key=lambda item: -item[1])[:15]:
        print(f"  missed {count:4}  {key}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--dump"]:
        dump(sys.argv[2], Path(sys.argv[3]))
    elif sys.argv[1:2] == ["--judge"]:
        judge(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        raise SystemExit(__doc__)
