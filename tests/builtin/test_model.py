"""The model plugin: flags, derived sizes, position embeddings and model checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_ckpt_support import (  # noqa: E402
    BASE, FLAGS_JSONL, fact_mismatches, kernel, messages, problems, resolve, warnings_of,
)

from megaplug.builtin.model.types import AttnBackend  # noqa: E402
from megaplug.builtin.model.derivations import swiglu_ffn_hidden_size  # noqa: E402


def with_base(*argv: str) -> list[str]:
    return [*BASE, *argv]


def without(flag: str, argv: list[str] = BASE) -> list[str]:
    index = argv.index(flag)
    return argv[:index] + argv[index + 2:]


# -- flags -----------------------------------------------------------------------------

@pytest.mark.skipif(not FLAGS_JSONL.exists(), reason="Megatron flag facts not available")
def test_every_model_flag_matches_megatrons_parser():
    assert fact_mismatches("model") == []


def test_the_model_plugin_declares_164_flags_including_the_seed_only_ones():
    table = kernel().table
    specs = [s for s in table.plugin_specs("model") if s.kind == "flag"]
    assert len(specs) == 164
    assert table.by_option["--wide-residual"].dest == "wide_residual_num_streams"
    for option in ("--csa-compress-ratios", "--embedding-min-norm",
                   "--original-max-position-embeddings", "--output-projection-groups",
                   "--output-projection-lora-rank", "--wide-residual-learned-retention",
                   "--wide-residual-retention-init", "--wide-residual-retention-max-forget",
                   "--wide-residual-streamwise-sigmoid-init-scale"):
        assert table.by_option[option].plugin == "model"


def test_wide_residual_seed_defaults():
    resolved = resolve(with_base("--wide-residual", "4"))
    assert resolved.wide_residual_num_streams == 4
    assert resolved.wide_residual_retention_init == 0.999
    assert resolved.wide_residual_retention_max_forget == 0.10
    assert resolved.wide_residual_streamwise_sigmoid_init_scale == 0.01
    assert resolved.wide_residual_learned_retention is False


def test_attention_backend_is_parsed_by_member_name():
    assert resolve(BASE).attention_backend is AttnBackend.auto
    assert resolve(with_base("--attention-backend", "flash")).attention_backend is AttnBackend.flash
    found = problems(with_base("--attention-backend", "cudnn"))
    assert "--attention-backend: invalid AttnBackend value 'cudnn'" in found[0].message
    assert found[0].hint == "choose from flash, fused, unfused, local, auto"


def test_window_size_is_a_tuple_of_ints():
    assert resolve(with_base("--window-size", "(128,0)")).window_size == (128, 0)
    assert resolve(with_base("--window-size", "64,8")).window_size == (64, 8)
    assert "comma-separated integers" in messages(with_base("--window-size", "a,b"))[0]


@pytest.mark.parametrize("flag", ["--no-rope-freq", "--window-attn-skip-freq",
                                  "--linear-attention-freq"])
def test_frequency_flags_take_a_ratio_or_a_pattern(flag):
    dest = flag.lstrip("-").replace("-", "_")
    assert getattr(resolve(with_base(flag, "4")), dest) == 4
    assert getattr(resolve(with_base(flag, "([0]*3+[1])*2")), dest) == [0, 0, 0, 1, 0, 0, 0, 1]


@pytest.mark.parametrize("text", ["[1]*2+__import__('os')", "[1, 0]", "[1]*2;[0]"])
def test_patterns_accept_only_digits_commas_brackets_plus_and_star(text):
    found = messages(with_base("--no-rope-freq", text))
    assert len(found) == 1 and "is not allowed" in found[0]


def test_csa_compress_ratios_is_always_a_pattern():
    assert resolve(with_base("--csa-compress-ratios", "([0]+[4,128]*2)")).csa_compress_ratios == [
        0, 4, 128, 4, 128]


def test_onnx_safe_keeps_megatrons_bool_of_the_text():
    assert resolve(BASE).onnx_safe is None
    assert resolve(with_base("--onnx-safe", "False")).onnx_safe is True


def test_yarn_rounding_has_a_positive_and_a_negative_spelling():
    assert resolve(BASE).yarn_correction_range_round_to_int is None
    assert (resolve(with_base("--yarn-correction-range-round-to-int"))
            .yarn_correction_range_round_to_int is True)
    assert (resolve(with_base("--no-yarn-correction-range-round-to-int"))
            .yarn_correction_range_round_to_int is False)


def test_list_flags():
    resolved = resolve(with_base("--mrope-section", "16", "24", "24",
                                 "--retriever-report-topk-accuracies", "1", "5"))
    assert resolved.mrope_section == [16, 24, 24]
    assert resolved.retriever_report_topk_accuracies == [1, 5]
    assert resolve(BASE).retriever_report_topk_accuracies == []


# -- layer counts ----------------------------------------------------------------------

def test_num_layers_fills_encoder_num_layers():
    resolved = resolve(BASE)
    assert resolved.encoder_num_layers == 2
    assert resolved.source("encoder_num_layers").source == "derived"


def test_encoder_num_layers_fills_num_layers():
    argv = without("--num-layers") + ["--encoder-num-layers", "6", "--decoder-num-layers", "6"]
    resolved = resolve(argv)
    assert (resolved.num_layers, resolved.encoder_num_layers,
            resolved.decoder_num_layers) == (6, 6, 6)


def test_num_layers_and_encoder_num_layers_exclude_each_other():
    found = problems(with_base("--encoder-num-layers", "2"))
    assert [p.message for p in found] == [
        "--num-layers 2 and --encoder-num-layers 2 cannot both be given"]
    assert found[0].flags == ("--num-layers", "--encoder-num-layers")


def test_a_layer_count_is_required():
    assert messages(without("--num-layers")) == ["the number of layers is not set"]


def test_a_hybrid_pattern_supplies_the_layer_count_before_model_runs():
    resolved = resolve(without("--num-layers") + ["--hybrid-layer-pattern", "M*M-"])
    assert resolved.num_layers == 4 and resolved.encoder_num_layers == 4


@pytest.mark.parametrize("flag", ["--hidden-size", "--num-attention-heads",
                                  "--max-position-embeddings"])
def test_shape_flags_are_required(flag):
    found = problems(without(flag))
    assert f"{flag} is required" in [p.message for p in found]


# -- derived sizes ---------------------------------------------------------------------

@pytest.mark.parametrize("hidden, swiglu, expected", [
    (64, False, 256), (64, True, 128), (4096, True, 10880), (4096, False, 16384),
    (1024, True, 2688), (512, True, 1344),
])
def test_ffn_hidden_size_defaults(hidden, swiglu, expected):
    argv = ["--num-layers", "2", "--hidden-size", str(hidden), "--num-attention-heads", "8",
            "--max-position-embeddings", "128"] + (["--swiglu"] if swiglu else [])
    assert resolve(argv).ffn_hidden_size == expected


def test_swiglu_rule_is_two_thirds_of_four_h_rounded_down_to_64():
    assert swiglu_ffn_hidden_size(768) == 2048
    assert swiglu_ffn_hidden_size(100) == 256


def test_an_explicit_ffn_hidden_size_is_kept():
    resolved = resolve(with_base("--ffn-hidden-size", "100", "--swiglu"))
    assert resolved.ffn_hidden_size == 100
    assert resolved.source("ffn_hidden_size").source == "command-line"


def test_kv_channels_is_hidden_size_over_heads():
    resolved = resolve(BASE)
    assert resolved.kv_channels == 16
    assert resolved.source("kv_channels").inputs == ("hidden_size", "num_attention_heads")


def test_heads_must_divide_the_hidden_size_unless_kv_channels_is_given():
    found = problems(["--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "6",
                      "--max-position-embeddings", "128"])
    assert [p.message for p in found] == [
        "--hidden-size 512 is not divisible by --num-attention-heads 6"]
    assert found[0].plugin == "model"
    assert found[0].hint.startswith("use a head count that divides 512 (e.g. 16, 32, 64, 128)")
    accepted = resolve(["--num-layers", "2", "--hidden-size", "512", "--num-attention-heads", "6",
                        "--kv-channels", "64", "--max-position-embeddings", "128"])
    assert accepted.kv_channels == 64


def test_kv_channels_follow_megatron_arithmetic_for_odd_head_counts():
    # 512 % -8 == 0 passes Megatron's assert (kv_channels 512 // -8); zero heads cannot divide
    base = ["--num-layers", "2", "--hidden-size", "512", "--max-position-embeddings", "128"]
    assert resolve([*base, "--num-attention-heads", "-8"]).kv_channels == -64
    found = problems([*base, "--num-attention-heads", "0"])
    assert [p.message for p in found] == [
        "--hidden-size 512 is not divisible by --num-attention-heads 0"]


# -- biases, rotary and softmax adjustments ---------------------------------------------

def test_linear_biases_imply_the_qkv_bias():
    resolved = resolve(BASE)
    assert resolved.add_bias_linear is True and resolved.add_qkv_bias is True
    assert resolved.bias_gelu_fusion is True


def test_no_linear_biases_turn_off_bias_gelu_fusion():
    resolved = resolve(with_base("--disable-bias-linear"))
    assert resolved.add_qkv_bias is False and resolved.bias_gelu_fusion is False
    assert resolve(with_base("--disable-bias-linear", "--add-qkv-bias")).add_qkv_bias is True


def test_the_deprecated_rotary_flag_means_rope():
    resolved = resolve(with_base("--use-rotary-position-embeddings"))
    assert resolved.position_embedding_type == "rope"
    assert resolved.apply_rope_fusion is True
    assert resolved.source("position_embedding_type").source == "derived"


def test_rope_fusion_is_off_without_rotary_embeddings():
    assert resolve(BASE).apply_rope_fusion is False
    assert resolve(with_base("--position-embedding-type", "rope")).apply_rope_fusion is True


@pytest.mark.parametrize("mtp", [(), ("--mtp-num-layers", "1")])
def test_hidden_state_mixing_is_turned_off_below_two_mtp_layers(mtp):
    # Megatron-LM main: "--mtp-hsm needs at least two MTP layers", a warning, then off
    resolved = resolve(with_base("--position-embedding-type", "rope", "--mtp-hsm", *mtp))
    assert resolved.mtp_hsm is False
    assert resolved.source("mtp_hsm").source == "derived"
    layers = mtp[1] if mtp else "None"
    assert [w for w in warnings_of(resolved) if "--mtp-hsm" in w] == [
        f"--mtp-hsm needs at least two MTP layers to mix anything, but --mtp-num-layers is "
        f"{layers}: hidden-state mixing is turned off"]


def test_hidden_state_mixing_stays_on_with_two_mtp_layers():
    resolved = resolve(with_base("--position-embedding-type", "rope", "--mtp-hsm",
                                 "--mtp-num-layers", "2"))
    assert resolved.mtp_hsm is True
    assert not [w for w in warnings_of(resolved) if "--mtp-hsm" in w]


def test_query_key_layer_scaling_forces_softmax_in_fp32():
    assert resolve(BASE).attention_softmax_in_fp32 is False
    assert resolve(with_base("--apply-query-key-layer-scaling")).attention_softmax_in_fp32 is True


# -- checks ----------------------------------------------------------------------------

def test_position_embeddings_must_cover_the_sequence():
    found = problems(with_base("--seq-length", "256"))
    assert [p.message for p in found] == [
        "--max-position-embeddings 128 is smaller than --seq-length 256"]
    assert found[0].flags == ("--max-position-embeddings", "--seq-length")
    assert "decoder-seq-length" in messages(with_base("--decoder-seq-length", "129"))[0]
    resolve(with_base("--seq-length", "128", "--decoder-seq-length", "128"))


def test_fp32_residual_connection_needs_half_precision():
    assert messages(with_base("--fp32-residual-connection")) == [
        "--fp32-residual-connection needs --fp16 or --bf16"]
    resolve(with_base("--fp32-residual-connection", "--bf16"))


def test_qk_clip_needs_transformer_engine_2_9():
    assert messages(with_base("--qk-clip"), transformer_engine="2.8.0") == [
        "--qk-clip requires transformer_engine >= 2.9.0, found 2.8.0"]
    assert messages(with_base("--qk-clip"), transformer_engine=None) == [
        "--qk-clip requires transformer_engine >= 2.9.0, not installed"]
    resolve(with_base("--qk-clip"))


def test_qk_clip_alpha_and_threshold_ranges():
    assert messages(with_base("--qk-clip", "--qk-clip-alpha", "1.0",
                              "--qk-clip-threshold", "0")) == [
        "--qk-clip-alpha 1.0 must lie strictly between 0 and 1",
        "--qk-clip-threshold 0.0 must be positive"]
    resolve(with_base("--qk-clip-alpha", "2"))  # only checked with --qk-clip


def test_no_position_embedding_is_only_accepted_with_rope():
    assert messages(with_base("--no-position-embedding")) == [
        "--no-position-embedding is deprecated"]
    resolve(with_base("--no-position-embedding", "--position-embedding-type", "rope"))
    resolve(with_base("--no-position-embedding", "--use-rotary-position-embeddings"))


def test_relative_position_embeddings_need_transformer_engine_layers():
    argv = with_base("--position-embedding-type", "relative", "--transformer-impl", "local")
    assert messages(argv) == [
        "--position-embedding-type relative is not supported with --transformer-impl local"]
    resolve(with_base("--position-embedding-type", "relative"))


def test_mrope_needs_a_section():
    found = problems(with_base("--position-embedding-type", "mrope"))
    assert [p.message for p in found] == [
        "--mrope-section should be set when using --position-embedding-type mrope"]
    resolve(with_base("--position-embedding-type", "mrope", "--mrope-section", "2", "3", "3"))


@pytest.mark.parametrize("kind", ["rope", "none"])
def test_mtp_accepts_rotary_or_no_position_embeddings(kind):
    argv = with_base("--mtp-num-layers", "1", "--position-embedding-type", kind)
    assert resolve(argv).mtp_num_layers == 1


@pytest.mark.parametrize("kind", ["learned_absolute", "mrope", "yarn", "relative"])
def test_mtp_rejects_other_position_embeddings(kind):
    argv = with_base("--mtp-num-layers", "1", "--position-embedding-type", kind)
    if kind == "mrope":
        argv += ["--mrope-section", "2", "3", "3"]
    found = messages(argv)
    assert f"multi-token prediction does not support --position-embedding-type {kind}" in found


def test_mtp_in_a_hybrid_model_needs_rope_or_no_position_embedding():
    argv = without("--num-layers") + ["--hybrid-layer-pattern", "M*", "--mtp-num-layers", "1"]
    assert messages(argv) == [
        "multi-token prediction does not support --position-embedding-type learned_absolute"]
    resolve(argv + ["--position-embedding-type", "none"])


def test_mtp_in_any_model_needs_rope_or_no_position_embedding():
    # Megatron's first MTP check (rope or none) runs for every model, before its wider one
    assert messages(with_base("--mtp-num-layers", "1")) == [
        "multi-token prediction does not support --position-embedding-type learned_absolute"]
    assert resolve(with_base("--mtp-num-layers", "1", "--position-embedding-type", "rope")) \
        .mtp_num_layers == 1


def test_the_first_mtp_check_sees_the_deprecated_rotary_flag_unapplied():
    argv = without("--num-layers") + ["--hybrid-layer-pattern", "M*", "--mtp-num-layers", "1",
                                      "--use-rotary-position-embeddings"]
    assert len(messages(argv)) == 1


def test_local_attention_backend_needs_the_local_spec():
    assert messages(with_base("--attention-backend", "local")) == [
        "--attention-backend local is only supported with --spec local"]
    resolve(with_base("--attention-backend", "local", "--spec", "local"))


def test_wide_residual_cannot_come_with_a_yaml_config():
    assert messages(with_base("--wide-residual", "2", "--yaml-cfg", "model.yaml")) == [
        "--wide-residual cannot be combined with --yaml-cfg"]


def test_a_typical_launch_resolves_without_warnings():
    resolved = resolve(with_base("--seq-length", "128", "--swiglu", "--normalization", "RMSNorm"))
    assert warnings_of(resolved) == []
    assert resolved.normalization == "RMSNorm" and resolved.ffn_hidden_size == 128
