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


def test_llama3_rope_scaling_other_than_llama_3_1s_is_named(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "llama-3.2-1b.json").read_text())
    data["rope_scaling"]["high_freq_factor"] = 2.0
    (tmp_path / "config.json").write_text(json.dumps(data))
    notes = import_hf(str(tmp_path), [], None).notes
    assert any("high_freq_factor 2.0: no flag" in note and "keeps 4.0" in note
               for note in notes)
    assert not any("low_freq_factor" in note for note in notes)


def test_deepseek_v3_has_mla_dense_first_layers_expert_bias_and_mtp() -> None:
    config = _resolved("deepseek-v3.json")
    assert config.multi_latent_attention and config.qk_layernorm
    assert (config.q_lora_rank, config.kv_lora_rank) == (1536, 512)
    assert (config.qk_head_dim, config.qk_pos_emb_head_dim, config.v_head_dim) == \
        (128, 64, 128)
    assert config.moe_layer_freq == [0, 0, 0] + [1] * 58
    assert (config.num_experts, config.moe_router_topk) == (256, 8)
    assert config.moe_shared_expert_intermediate_size == 2048
    assert config.moe_router_score_function == "sigmoid"
    assert config.moe_router_enable_expert_bias and config.moe_router_pre_softmax
    assert (config.moe_router_num_groups, config.moe_router_group_topk) == (8, 4)
    assert config.moe_router_topk_scaling_factor == 2.5
    assert config.moe_router_load_balancing_type == "seq_aux_loss"
    assert config.mtp_num_layers == 1 and config.rotary_scaling_factor == 40.0
    assert config.untie_embeddings_and_output_weights and config.group_query_attention is False


def test_deepseek_v2_routes_group_limited_by_softmax_with_its_aux_loss() -> None:
    config = _resolved("deepseek-v2.json")
    assert config.moe_layer_freq == [0] + [1] * 59
    assert config.moe_router_score_function == "softmax"
    assert config.moe_router_enable_expert_bias is False
    assert config.moe_aux_loss_coeff == 0.001 and config.mtp_num_layers is None
    assert (config.mscale, config.mscale_all_dim) == (0.707, 0.707)
    assert config.moe_shared_expert_intermediate_size == 1536 * 2


def test_gemma2_windows_every_other_layer_and_names_what_no_flag_says() -> None:
    imported = _imported("gemma2-2b.json")
    assert imported.argv[imported.argv.index("--window-size") + 1] == "4095,0"
    config = megaplug.resolve([*imported.argv, *LAUNCH])
    assert config.window_size == (4095, 0) and config.window_attn_skip_freq == 2
    assert config.layernorm_zero_centered_gamma and config.normalization == "RMSNorm"
    assert not config.untie_embeddings_and_output_weights and config.kv_channels == 256
    assert config.swiglu is False
    joined = "\n".join(imported.notes)
    for named in ("GeGLU", "attn_logit_softcapping 50.0", "final_logit_softcapping 30.0",
                  "sqrt(hidden_size)"):
        assert named in joined
    assert imported.one_way == {}


def test_gemma3_has_qk_layernorm_and_names_the_local_rope_base() -> None:
    imported = _imported("gemma3-toy.json")
    config = megaplug.resolve([*imported.argv, *LAUNCH])
    assert config.qk_layernorm and config.window_attn_skip_freq == 6
    assert config.window_size == (511, 0) and config.rotary_base == 1000000
    assert any("rope_local_base_freq 10000.0" in note for note in imported.notes)


def test_phi3_longrope_is_named_and_its_dropout_kept(tmp_path: Path) -> None:
    # a minimal hand-written Phi-3 config (Bridge's tests hold none): the fields Phi-3
    # mini-128k's config gives, with 2 layers and short factor lists
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "phi3", "num_hidden_layers": 2, "hidden_size": 3072,
        "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 32,
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "sliding_window": 262144,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0], "long_factor": [1.1]},
        "rms_norm_eps": 1e-05, "tie_word_embeddings": False, "vocab_size": 32064}))
    imported = import_hf(str(tmp_path), [], None)
    config = megaplug.resolve([*imported.argv, *LAUNCH])
    assert config.swiglu and config.normalization == "RMSNorm"
    assert config.window_size == (262143, 0) and config.hidden_dropout == 0.0
    assert any("'longrope'" in note for note in imported.notes)
    assert imported.one_way == {}


def test_mixtral_routes_softmax_top_2_of_8_experts() -> None:
    config = _resolved("mixtral-8x7b.json")
    assert (config.num_experts, config.moe_router_topk) == (8, 2)
    assert config.moe_router_pre_softmax is False and config.moe_input_jitter_eps is None
    assert config.num_query_groups == 8 and config.rotary_base == 1000000.0


def test_qwen2_moe_softmax_first_shared_expert_and_qkv_bias() -> None:
    config = _resolved("qwen1.5-moe-a2.7b.json")
    assert (config.num_experts, config.moe_router_topk, config.moe_ffn_hidden_size) == \
        (60, 4, 1408)
    assert config.moe_shared_expert_intermediate_size == 5632
    assert config.moe_router_pre_softmax  # norm_topk_prob false: softmax before the top-k
    assert config.add_qkv_bias and config.add_bias_linear is False
    assert config.moe_layer_freq == 1


def test_qwen_moe_dense_layers_follow_hfs_rule(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "qwen1.5-moe-a2.7b.json").read_text())
    data.update(num_hidden_layers=6, decoder_sparse_step=2, mlp_only_layers=[5],
                layer_types=["full_attention"] * 6)
    (tmp_path / "config.json").write_text(json.dumps(data))
    argv = import_hf(str(tmp_path), [], None).argv
    # HF: layer i is MoE when (i + 1) % 2 == 0 and i is no mlp_only layer
    assert megaplug.resolve([*argv, *LAUNCH]).moe_layer_freq == [0, 1, 0, 1, 0, 0]


def test_gpt2_has_learned_positions_tanh_gelu_and_its_dropouts() -> None:
    config = megaplug.resolve([*_imported("gpt2.json").argv, "--seq-length", "1024",
                               "--micro-batch-size", "1"])
    assert (config.num_layers, config.hidden_size, config.num_attention_heads) == (12, 768, 12)
    assert config.position_embedding_type == "learned_absolute"
    assert config.max_position_embeddings == 1024 and config.vocab_size == 50257
    assert config.openai_gelu and config.swiglu is False
    assert (config.attention_dropout, config.hidden_dropout) == (0.1, 0.1)
    assert config.normalization == "LayerNorm" and config.add_bias_linear
    assert not config.untie_embeddings_and_output_weights


def test_phi3_mini_is_llamas_layout_with_its_own_dropout() -> None:
    imported = _imported("phi3-mini-4k.json")
    config = megaplug.resolve([*imported.argv, *LAUNCH])
    assert (config.num_layers, config.hidden_size, config.ffn_hidden_size) == (32, 3072, 8192)
    assert config.swiglu and config.normalization == "RMSNorm"
    assert config.untie_embeddings_and_output_weights and config.window_size is None
    assert imported.one_way == {}
