"""The FSDP size rules at the smallest values that matter: 1 and 2.

Through ``megaplug.resolve`` with every installed plugin; a rule's problem is found by the
flags it names, not by the plugin or module that holds it.
"""

from __future__ import annotations

import pytest

import megaplug
from megaplug.testing import resolve

FSDP2 = ("--use-torch-fsdp2", "--untie-embeddings-and-output-weights",
         "--no-gradient-accumulation-fusion")
MEGATRON_FSDP = ("--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor")
PP = "--pipeline-model-parallel-size"
EP = "--expert-model-parallel-size"


def outcome(*argv: str, world: int, capability: tuple[int, int] = (9, 0)):
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1",
                                                  "torch": "2.13.0"},
                                        device_capability=capability)
    try:
        return resolve(*argv, environ={"WORLD_SIZE": str(world), "RANK": "0"},
                       target=target), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


def naming(found: list, *flags: str) -> list:
    return [p for p in found if set(flags) <= set(p.flags)]


@pytest.mark.parametrize("pp, rejected", [(1, False), (2, True)])
def test_torch_fsdp2_refuses_pipeline_parallelism_from_two(pp, rejected):
    _, found = outcome(*FSDP2, PP, str(pp), "--num-layers", "2", world=pp)
    assert bool(naming(found, "--use-torch-fsdp2", PP)) is rejected
    if not rejected:
        assert found == []


@pytest.mark.parametrize("ep, rejected", [(1, False), (2, True)])
def test_torch_fsdp2_refuses_expert_parallelism_from_two(ep, rejected):
    _, found = outcome(*FSDP2, EP, str(ep), "--num-experts", "2", world=ep)
    assert bool(naming(found, "--use-torch-fsdp2", EP)) is rejected
    if not rejected:
        assert found == []


@pytest.mark.parametrize("ep, groups", [(1, ["dp_cp"]), (2, ["dp_cp", "ep_dp"])])
def test_expert_parallelism_from_two_gets_its_high_priority_stream(ep, groups):
    resolved, found = outcome(*MEGATRON_FSDP, EP, str(ep), "--num-experts", "2", world=ep,
                              capability=(10, 0))
    assert found == []
    assert resolved.high_priority_stream_groups == groups


@pytest.mark.parametrize("major, groups", [(9, []), (10, ["dp_cp"])])
def test_megatron_fsdp_streams_start_at_blackwell(major, groups):
    resolved, found = outcome(*MEGATRON_FSDP, world=1, capability=(major, 0))
    assert found == []
    assert resolved.high_priority_stream_groups == groups
