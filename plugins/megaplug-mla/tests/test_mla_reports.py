"""What each MLA rule reports, whole (message, flags, hint), and the switch's provenance
(value, why and from what)."""

from __future__ import annotations

import pytest

import megaplug


def reported(resolve, *argv: str) -> list[tuple]:
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*argv)
    return [(p.message, tuple(p.flags), p.hint) for p in info.value.problems]


def switched(resolved: megaplug.Resolved) -> tuple:
    record = resolved.source("multi_latent_attention")
    return (resolved.multi_latent_attention, record.source, record.reason,
            tuple(record.inputs))


@pytest.mark.parametrize("argv, expected", [
    (("--hybrid-layer-pattern", "MDM+"),
     (True, "derived", "the hybrid pattern has MLA attention layers ('+', 'D')",
      ("hybrid_layer_pattern",))),
    (("--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "D-",
      "--mtp-num-layers", "1"),
     (True, "derived", "the hybrid pattern has MLA attention layers ('D')",
      ("mtp_hybrid_override_pattern",))),
])
def test_the_switch_names_the_pattern_and_its_mla_layers(resolve, argv, expected):
    assert switched(resolve(*argv)) == expected


def test_a_legacy_mtp_pattern_is_ignored_when_the_main_one_has_an_mtp_part(resolve):
    # the main pattern's own MTP part ('/...') wins over --mtp-hybrid-override-pattern
    argv = ("--hybrid-layer-pattern", "M*M*/*-", "--mtp-hybrid-override-pattern", "D-",
            "--mtp-num-layers", "1")
    assert resolve(*argv).multi_latent_attention is False
    assert resolve("--hybrid-layer-pattern", "M*M*/D-",
                   "--mtp-num-layers", "1").multi_latent_attention is True


def test_mla_with_group_query_attention_whole(resolve):
    assert reported(resolve, "--multi-latent-attention", "--group-query-attention") == [
        ("--multi-latent-attention and --group-query-attention cannot be used together",
         ("--multi-latent-attention", "--group-query-attention"),
         "drop --group-query-attention (MLA compresses keys and values through --kv-lora-rank "
         "instead)")]


def test_down_proj_fusion_without_mla_whole(resolve):
    assert reported(resolve, "--mla-down-proj-fusion") == [
        ("--mla-down-proj-fusion needs --multi-latent-attention",
         ("--mla-down-proj-fusion", "--multi-latent-attention"),
         "add --multi-latent-attention, or drop --mla-down-proj-fusion")]
