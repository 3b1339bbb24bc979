"""Inference checks that differ between Megatron releases (docs/megatron-release-rules.md):
Megatron 0.18 alone imports flashinfer when it is the sampling backend."""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.testing import problems

BACKEND = ("--inference-dynamic-batching-sampling-backend", "flashinfer", "-p", "no:preflight")


def inference_messages(version: str, flashinfer: str | None) -> list[str]:
    target = TargetEnvironment(packages={"megatron_core": version, "flashinfer": flashinfer,
                                         "multistorageclient": None},
                               device_capability=(9, 0))
    return [p.message for p in problems(*BACKEND, target=target) if p.plugin == "inference"]


def test_flashinfer_backend_needs_the_package_in_0_18():
    assert inference_messages("0.18.2", None) == [
        "--inference-dynamic-batching-sampling-backend flashinfer requires flashinfer, "
        "not installed"]
    assert inference_messages("0.18.2", "0.6.4") == []


@pytest.mark.parametrize("version", ["0.19.0", "main"])
def test_flashinfer_backend_not_checked_from_0_19(version):
    assert inference_messages(version, None) == []
