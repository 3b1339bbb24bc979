"""Inside the training process a package that does not import is absent, not unknown.

On a login node an uninstalled Transformer Engine says nothing of the cluster, so checks that
need it are not made unless the launch states it (``--assume transformer_engine=none``).
Inside the training process (the switch; the facade under torchrun) the target is the
process itself (``TargetEnvironment(own_process=True)``): every check that depends on
Transformer Engine decides exactly as if its absence were stated. Held on every launch of
the pre-flight corpus (the Megatron tier's launches and probes), which reaches each of them.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import megaplug
from preflight_corpus import launches

TE = "transformer_engine"
pytestmark = pytest.mark.skipif(importlib.util.find_spec(TE) is not None,
                                reason="Transformer Engine is installed here")
#: A Transformer Engine check's own words when it decides on an absent one.
ABSENT = f"requires {TE} >= "


def _problems(launch: dict[str, Any], **target: Any) -> tuple[str, ...]:
    assume = launch.get("assume") or {}
    packages = {k: v for k, v in (assume.get("packages") or {}).items() if k != TE}
    packages.update(target.pop("packages", {}))
    capability = assume.get("device_capability")
    environ = dict(launch.get("env") or {})
    try:
        megaplug.resolve(list(launch["argv"]), environ=environ,
                         defaults=dict(launch.get("args_defaults") or {}),
                         target=megaplug.TargetEnvironment(
                             packages=packages, environ=environ,
                             device_capability=tuple(capability) if capability else None,
                             **target))
    except megaplug.ConfigError as error:
        return tuple(sorted(f"[{p.plugin}] {p.message}" for p in error.problems))
    return ()


def test_every_check_on_an_absent_transformer_engine_decides_in_the_training_process():
    decided: set[str] = set()
    for label, launch in sorted(launches().items()):
        stated = _problems(launch, packages={TE: None})
        assert _problems(launch, own_process=True) == stated, label
        absent = [p for p in stated if ABSENT in p and ", not installed;" in p]
        if absent:
            decided.update(p.split(" requires ")[0] for p in absent)
            login = _problems(launch)  # a login node: not stated, unknown, not judged
            assert not [p for p in login if ABSENT in p and ", not installed;" in p], label
    # the corpus reaches the checks of every Transformer Engine feature pre-flight knows
    assert {"[preflight] RoPE fusion (on by default)", "[preflight] --moe-permute-fusion",
            "[preflight] --symmetric-ar-type", "[preflight] MoE with FP8",
            "[preflight] --overlap-dispatch-backward-with-experts-wgrad"} <= decided, decided
