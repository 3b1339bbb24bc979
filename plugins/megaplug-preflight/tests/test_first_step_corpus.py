"""The first-step corpus (first_step_corpus.py) at every release: megaplug refuses each
launch Megatron's code kills after building the model, naming the release, and accepts
each control; the catch rate per release is counted."""

from __future__ import annotations

import pytest
from first_step_corpus import LAUNCHES, Launch
from preflight_launches import ENVIRON

import megaplug
from megaplug.environment._releases import RELEASES


def verdict(launch: Launch, release: str) -> list[megaplug.Problem]:
    """Every problem megaplug reports for the launch on a cluster running ``release``."""
    target = megaplug.TargetEnvironment(packages={**launch.packages, "megatron_core": release},
                                        device_capability=(9, 0))
    try:
        megaplug.resolve([*launch.base, *launch.argv], environ=dict(ENVIRON), target=target)
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


CASES = [(launch, release) for launch in LAUNCHES for release in launch.releases()]


@pytest.mark.parametrize("launch, release", CASES,
                         ids=[f"{launch.name}@{release}" for launch, release in CASES])
def test_megaplug_refuses_what_megatron_kills_and_accepts_the_rest(launch, release):
    problems = verdict(launch, release)
    assert [str(p) for p in problems if p.plugin != "preflight"] == []  # a valid launch
    if not launch.killed_at(release):
        assert problems == []
        return
    says, _, _ = launch.dies  # type: ignore[misc]
    assert len(problems) == 1
    assert says in problems[0].message
    assert f"Megatron {release} would raise this" in problems[0].message


def catch_rate() -> dict[str, tuple[int, int, int, int]]:
    """Per release: (killed launches refused, killed launches, controls accepted, controls)."""
    rate = {}
    for release in RELEASES[:-1]:
        here = [launch for launch in LAUNCHES if release in launch.releases()]
        killed = [launch for launch in here if launch.killed_at(release)]
        controls = [launch for launch in here if not launch.killed_at(release)]
        rate[release] = (sum(bool(verdict(launch, release)) for launch in killed), len(killed),
                         sum(not verdict(launch, release) for launch in controls), len(controls))
    return rate


def test_every_rule_has_a_killed_launch_and_a_control():
    from megaplug_preflight import first_step

    rules = {check.__name__ for check in first_step.CHECKS}
    killed = {launch.rule for launch in LAUNCHES if launch.dies}
    controls = {launch.rule for launch in LAUNCHES if launch.dies is None}
    assert {name.partition(" ")[0] for name in killed} == rules
    assert killed == controls


def test_the_catch_rate_per_release():
    rate = catch_rate()
    assert rate["0.13.0"] == (13, 13, 15, 15)
    assert rate["0.16.0"] == (16, 16, 18, 18)
    assert rate["0.18.0"] == (15, 15, 19, 19)
    assert rate["0.19.2"] == (16, 16, 20, 20)
    assert rate["main"] == (16, 16, 20, 20)
    assert all(caught == killed and accepted == controls
               for caught, killed, accepted, controls in rate.values())
