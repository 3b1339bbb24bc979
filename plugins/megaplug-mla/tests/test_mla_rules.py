"""MLA flags, the hybrid-pattern switch, and the MLA checks."""

from __future__ import annotations

import pytest


def test_defaults_match_megatron(resolve):
    r = resolve()
    assert r.multi_latent_attention is False
    assert (r.q_lora_rank, r.kv_lora_rank) == (None, 32)
    assert (r.qk_head_dim, r.qk_pos_emb_head_dim, r.v_head_dim) == (128, 64, 128)
    assert (r.rotary_scaling_factor, r.mscale, r.mscale_all_dim) == (1.0, 1.0, 0.0)
    assert r.attention_latent_norm_epsilon is None
    assert r.cache_mla_latents is False and r.mla_down_proj_fusion is False


def test_flags_parse(resolve):
    r = resolve("--multi-latent-attention", "--q-lora-rank", "1536", "--kv-lora-rank", "512",
                "--qk-head-dim", "192", "--rotary-scaling-factor", "40",
                "--attention-latent-norm-epsilon", "1e-6")
    assert (r.q_lora_rank, r.kv_lora_rank, r.qk_head_dim) == (1536, 512, 192)
    assert r.rotary_scaling_factor == 40.0 and r.attention_latent_norm_epsilon == 1e-6


@pytest.mark.parametrize("pattern", ["MDM-", "M-M-|MDM-", "M*M*/D-", "M+M-", "M*M*/+-"])
def test_hybrid_pattern_with_mla_layers_enables_mla(resolve, pattern):
    r = resolve("--hybrid-layer-pattern", pattern)
    assert r.multi_latent_attention is True
    assert r.source("multi_latent_attention").plugin == "mla"


@pytest.mark.parametrize("pattern", ["M-M*-M-", "MEMEM*E/*E", "G*G-"])
def test_hybrid_pattern_without_mla_layers_leaves_mla_off(resolve, pattern):
    assert resolve("--hybrid-layer-pattern", pattern).multi_latent_attention is False


def test_legacy_mtp_pattern_counts_when_it_will_be_merged(resolve):
    argv = ("--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "D-")
    assert resolve(*argv).multi_latent_attention is False
    assert resolve(*argv, "--mtp-num-layers", "1").multi_latent_attention is True


def test_mla_excludes_group_query_attention(problems):
    assert problems("--multi-latent-attention") == []
    assert problems("--group-query-attention") == []
    messages = problems("--multi-latent-attention", "--group-query-attention")
    assert messages == ["--multi-latent-attention and --group-query-attention cannot be used "
                        "together"]


def test_hybrid_mla_layers_exclude_group_query_attention(problems):
    assert problems("--hybrid-layer-pattern", "MD", "--group-query-attention")


def test_down_proj_fusion_needs_mla(problems):
    assert problems("--multi-latent-attention", "--mla-down-proj-fusion") == []
    assert problems("--hybrid-layer-pattern", "D-", "--mla-down-proj-fusion") == []
    assert problems("--mla-down-proj-fusion") == [
        "--mla-down-proj-fusion needs --multi-latent-attention"]
