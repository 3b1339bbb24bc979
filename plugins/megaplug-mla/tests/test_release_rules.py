"""MLA checks that differ between Megatron releases (docs/megatron-release-rules.md): MLA
excludes grouped-query attention from 0.16."""

from __future__ import annotations

from megaplug import TargetEnvironment
from megaplug.testing import problems

MLA_GQA = ("--multi-latent-attention", "--group-query-attention", "--num-query-groups", "2",
           "-p", "no:preflight")


def mla_messages(version: str) -> list[str]:
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None})
    return [p.message for p in problems(*MLA_GQA, target=target) if p.plugin == "mla"]


def test_mla_with_gqa_refused_from_0_16():
    assert mla_messages("0.16.1") == [
        "--multi-latent-attention and --group-query-attention cannot be used together"]
    assert mla_messages("main") == mla_messages("0.16.1")


def test_mla_with_gqa_not_checked_before_0_16():
    assert mla_messages("0.15.3") == []
