"""What pre-flight says about every launch of the Megatron tier, without Megatron.

The launches are the shared parity cases and mutations that Megatron's ``validate_args``
accepts, and every probe of ``megatron/preflight_probes.py`` applied to its base launches:
the Megatron tier (``scripts/megatron-tier.sh``) checks that megaplug rejects each of them
that Megatron's model configuration rejects and accepts the rest. This module records
pre-flight's whole verdict on each (every problem and warning it reports: message, flags,
hint) in ``preflight_corpus.json``, so that the main suite, which has no Megatron, notices
any rule that starts to say something else on any of them.

    .venv/bin/python plugins/megaplug-preflight/tests/preflight_corpus.py   # write it again
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import megaplug

HERE = Path(__file__).resolve().parent
RECORD = HERE / "preflight_corpus.json"
sys.path.insert(0, str(HERE / "megatron"))

from preflight_probes import BASES, PROBES, apply, load_base, parity_launches  # noqa: E402


@functools.cache
def launches() -> dict[str, dict[str, Any]]:
    """Every launch of the Megatron tier, by a label naming the case or the probe and base.

    Built on first use and kept (callers must not change it): collecting the tests that use it
    reads only the record's labels, so building ~1,000 launches costs nothing at collection.
    """
    found = dict(parity_launches())
    for probe in PROBES:
        for kind in probe.on:
            for base in BASES[kind]:
                found[f"{probe.family}/{probe.aim}@{base}"] = apply(load_base(base), probe.edits)
    return found


def _entry(problem: megaplug.Problem) -> list[Any]:
    return [problem.message, list(problem.flags), problem.hint]


def verdict(launch: dict[str, Any]) -> dict[str, Any]:
    """Pre-flight's problems and warnings for the launch, and whether other plugins objected."""
    assume = launch.get("assume") or {}
    capability = assume.get("device_capability")
    environ = dict(launch.get("env") or {})
    target = megaplug.TargetEnvironment(packages=dict(assume.get("packages") or {}),
                                        device_capability=tuple(capability) if capability
                                        else None, environ=environ)
    try:
        resolved = megaplug.resolve(list(launch["argv"]), environ=environ,
                                    defaults=dict(launch.get("args_defaults") or {}),
                                    target=target)
    except megaplug.ConfigError as error:
        return {"others_object": any(p.plugin != "preflight" for p in error.problems),
                "problems": [_entry(p) for p in error.problems if p.plugin == "preflight"],
                "warnings": []}
    return {"others_object": False, "problems": [],
            "warnings": [_entry(w) for w in resolved.warnings if w.plugin == "preflight"]}


if __name__ == "__main__":
    RECORD.write_text(json.dumps({label: verdict(launch) for label, launch
                                  in sorted(launches().items())}, indent=1) + "\n")
    print(f"wrote {RECORD}")
