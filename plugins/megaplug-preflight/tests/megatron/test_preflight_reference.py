"""Pre-flight against Megatron's own model configuration.

Launches come from the shared parity cases: the cases and mutations themselves, and the
probes of ``preflight_probes`` (each aimed at one model-configuration check) applied to
them. Megatron's ``parse_args`` + ``validate_args`` + ``core_transformer_config_from_args``
judge every launch; those ``validate_args`` accepts are kept:

* a *rejection* (the model configuration raises) must be rejected by megaplug;
* a *control* (Megatron builds the configuration) must be accepted by megaplug.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import megatron.core
import pytest
from megaplug_preflight import first_step
from preflight_probes import BASES, PROBES, apply, load_base, parity_launches
from preflight_reference import TALLY, megatron_verdict, megaplug_problems

#: The reference release; probes aimed at checks added after it are left out against it.
RELEASE_WITHOUT_NEWER_CHECKS = "0.19.2"


@dataclass(frozen=True)
class Judged:
    """One launch, Megatron's verdict on it, and megaplug's problems (None: accepted)."""

    label: str
    family: str
    stage: str
    megatron_message: str
    problems: tuple[Any, ...] | None


def _judge(label: str, family: str, launch: dict[str, Any]) -> Judged | None:
    verdict = megatron_verdict(launch)
    if verdict.stage not in ("ok", "model-config"):
        return None  # validate_args (or the parser) refuses it: megaplug's parity covers that
    found = megaplug_problems(launch)
    return Judged(label, family, verdict.stage, verdict.message,
                  None if found is None else tuple(found))


def _probe_launches() -> list[tuple[str, str, dict[str, Any]]]:
    skip_newer = megatron.core.__version__ == RELEASE_WITHOUT_NEWER_CHECKS
    launches = []
    for probe in PROBES:
        if probe.newer and skip_newer:
            continue
        for kind in probe.on:
            for base in BASES[kind]:
                launches.append((f"{probe.aim} @ {base}", probe.family,
                                 apply(load_base(base), probe.edits)))
    return launches


@pytest.fixture(scope="module")
def judged() -> list[Judged]:
    launches = [(name, "parity", launch) for name, launch in parity_launches()]
    launches += _probe_launches()
    results = [_judge(*launch) for launch in launches]
    return [result for result in results if result is not None]


def _tally(kind: str, agreed: int, total: int) -> None:
    TALLY[kind] = [agreed, total]


#: The rules of Megatron's first step, judged by test_first_step_reference.py.
FIRST_STEP = {check.__name__ for check in first_step.CHECKS}


def test_megaplug_rejects_what_megatron_rejects_when_building_the_model(judged):
    rejections = [j for j in judged if j.stage == "model-config"]
    missed = [f"{j.label}: Megatron raised {j.megatron_message}"
              for j in rejections if j.problems is None]
    _tally("launches Megatron refuses building the model, rejected by megaplug",
           len(rejections) - len(missed), len(rejections))
    assert len(rejections) >= 200, "the probes no longer reach Megatron's model configuration"
    assert not missed, "\n".join(missed)


def test_megaplug_rejections_come_from_preflight_and_say_so(judged):
    for j in (j for j in judged if j.stage == "model-config" and j.problems):
        mine = [p for p in j.problems if p.plugin == "preflight"]
        assert mine, f"{j.label}: rejected, but not by pre-flight: {[str(p) for p in j.problems]}"
        # a launch Megatron refuses while building may also die at its first step
        assert all((p.message.endswith("Megatron would raise this when building the model")
                    or p.rule in FIRST_STEP) and p.flags and p.hint for p in mine), \
            [str(p) for p in mine]


def test_megaplug_accepts_what_megatron_builds(judged):
    controls = [j for j in judged if j.stage == "ok"]
    # a launch Megatron builds may still die at its first step: test_first_step_reference
    refused = [f"{j.label}: {[str(p) for p in j.problems]}" for j in controls if j.problems
               and any(p.rule not in FIRST_STEP for p in j.problems)]
    _tally("launches Megatron builds, accepted by megaplug", len(controls) - len(refused),
           len(controls))
    assert len(controls) >= 150
    assert not refused, "\n".join(refused)


#: Checks no probe reaches, and why (the rest must each reject some probe).
NOT_PROBED = {
    "gated_delta_net_needs_shapes": "the five shape flags have defaults (a config file's null "
                                    "reaches it)",
    "heterogeneous_layers_without_mla": "it needs a real heterogeneous-layer file",
    "sequence_parallel_needs_tensor_parallel": "validate_args turns sequence parallelism off "
                                               "for TP 1 (only a negative TP reaches it)",
    "heads_group_into_query_groups": "a warning",
    "mlp_width_divides_over_tensor_parallel_ranks": "a warning",
}


def test_every_check_rejects_some_probe(judged):
    from megaplug_preflight.checks import CHECKS

    reached = {p.rule for j in judged if j.stage == "model-config" and j.problems
               for p in j.problems if p.plugin == "preflight"}
    checks = {check.__name__ for check in CHECKS} - set(NOT_PROBED) - FIRST_STEP
    _tally("pre-flight checks rejecting some probe", len(reached & checks), len(checks))
    missing = checks - reached
    if megatron.core.__version__ == RELEASE_WITHOUT_NEWER_CHECKS:
        # flags this release does not parse, or checks it does not make
        assert len(missing) <= 15, sorted(missing)
    else:
        assert not missing, sorted(missing)


def test_every_family_has_rejections_and_controls(judged):
    families = {probe.family for probe in PROBES}
    rejected = {j.family for j in judged if j.stage == "model-config"}
    controlled = {j.family for j in judged if j.stage == "ok"}
    assert families <= rejected, f"no rejection reached for {sorted(families - rejected)}"
    assert "parity" in controlled
