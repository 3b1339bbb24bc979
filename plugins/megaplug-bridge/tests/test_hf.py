"""``megaplug import hf``: a Hugging Face config's architecture as flags, read as plain JSON
(transformers is not installed in this tier), on real configs (tests/data/hf/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import megaplug
from megaplug_bridge.hf import import_hf, settings_of

FIXTURES = Path(__file__).parent / "data" / "hf"
#: What a launch adds to a model's architecture to be resolvable.
LAUNCH = ["--seq-length", "4096", "--micro-batch-size", "1"]


def _imported(name: str):
    return import_hf(str(FIXTURES / name), [], None)


def _resolved(name: str):
    return megaplug.resolve([*_imported(name).argv, *LAUNCH])


def test_llama_3_2_keeps_grouped_attention_and_llama3_rope_scaling() -> None:
    config = _resolved("llama-3.2-1b.json")
    assert (config.num_layers, config.hidden_size, config.ffn_hidden_size) == (16, 2048, 8192)
    assert config.num_attention_heads == 32 and config.num_query_groups == 8
    assert config.group_query_attention and config.kv_channels == 64
    assert config.normalization == "RMSNorm" and config.swiglu
    assert config.position_embedding_type == "rope" and config.rotary_base == 500000.0
    assert config.use_rope_scaling and config.rope_scaling_factor == 32.0
    assert not config.untie_embeddings_and_output_weights and config.bf16
    assert config.add_bias_linear is False and config.vocab_size == 128256


def test_qwen2_has_qkv_bias_and_no_linear_bias() -> None:
    config = _resolved("qwen2-toy.json")
    assert config.add_qkv_bias and config.add_bias_linear is False
    assert config.num_query_groups == 2 and config.layernorm_epsilon == 1e-06
    assert config.rotary_base == 1000000.0


def test_qwen3_moe_has_routed_experts_and_qk_layernorm() -> None:
    config = _resolved("qwen3-moe-30b-a3b.json")
    assert (config.num_experts, config.moe_router_topk, config.moe_ffn_hidden_size) == \
        (128, 8, 768)
    assert config.qk_layernorm and config.add_qkv_bias is False
    assert config.untie_embeddings_and_output_weights


def test_fields_no_flag_says_are_named_not_dropped() -> None:
    imported = _imported("qwen3-moe-30b-a3b.json")
    assert "read as plain JSON" in imported.notes[0]
    data = json.loads((FIXTURES / "qwen3-moe-30b-a3b.json").read_text())
    data["some_new_field"] = 3
    _, _, unmapped = settings_of(data)
    assert "some_new_field" in unmapped


def test_an_unknown_family_is_named(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "mamba"}))
    with pytest.raises(ValueError, match="model_type 'mamba' is no family"):
        import_hf(str(tmp_path), [], None)
