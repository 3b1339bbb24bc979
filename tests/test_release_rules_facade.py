"""The facade's namespace holds the keys the target release's parse_args sets: from 0.18 on,
whether --global-batch-size was given (docs/megatron-release-rules.md)."""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.megatron import parse_and_validate_args
from megaplug.testing import minimal_argv

KEY = "_is_global_batch_size_explicitly_specified"


def namespace(version: str, *flags: str):
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None})
    return parse_and_validate_args(argv=minimal_argv(*flags), environ={}, target=target,
                                   torch_types=False, register=False)


@pytest.mark.parametrize("version", ["0.13.1", "0.17.1"])
def test_no_given_global_batch_record_before_0_18(version):
    assert not hasattr(namespace(version), KEY)


@pytest.mark.parametrize("version", ["0.18.2", "0.19.0", "main", "seed"])
def test_given_global_batch_recorded_from_0_18(version):
    assert getattr(namespace(version), KEY) is False
    assert getattr(namespace(version, "--global-batch-size", "8"), KEY) is True
