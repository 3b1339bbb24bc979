"""FSDP rules that differ between Megatron releases (docs/megatron-release-rules.md): in
Megatron 0.13, Megatron-FSDP is --use-custom-fsdp, a flag whose setting every launch has."""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.testing import resolve


def resolved(version: str, *flags: str):
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None})
    return resolve("-p", "no:preflight", *flags, target=target)


def test_use_custom_fsdp_is_a_flag_setting_in_0_13():
    assert resolved("0.13.1").use_custom_fsdp is False
    assert resolved("0.13.1", "--use-custom-fsdp").use_custom_fsdp is True


@pytest.mark.parametrize("version", ["0.14.0", "0.19.0", "main"])
def test_use_custom_fsdp_only_with_megatron_fsdp_from_0_14(version):
    assert "use_custom_fsdp" not in resolved(version)
