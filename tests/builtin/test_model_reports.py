"""What each model rule reports, whole: the message, every flag it names and the hint; and
each derivation's value, why and from what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_ckpt_support import BASE, problems, resolve  # noqa: E402

SHAPE = ["--hidden-size", "64", "--num-attention-heads", "4", "--max-position-embeddings", "128"]
LAYERS = "add --num-layers N (or --encoder-num-layers N for encoder-decoder models)"


def whole(argv, base: bool = True, **packages) -> list[tuple]:
    full = [*BASE, *argv] if base else list(argv)
    return [(p.message, tuple(p.flags), p.hint) for p in problems(full, **packages)]


def provenance(resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, expected", [
    (["--max-position-embeddings", "128"],
     [("the number of layers is not set", ("--num-layers", "--encoder-num-layers"), LAYERS),
      ("--hidden-size is required", ("--hidden-size",), "add --hidden-size 1024"),
      ("--num-attention-heads is required", ("--num-attention-heads",),
       "add --num-attention-heads 16")]),
    (["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4"],
     [("--max-position-embeddings is required", ("--max-position-embeddings",),
       "add --max-position-embeddings a value >= --seq-length")]),
    (["--num-layers", "2", *SHAPE, "--seq-length", "256", "--decoder-seq-length", "512"],
     [("--max-position-embeddings 128 is smaller than --seq-length 256",
       ("--max-position-embeddings", "--seq-length"),
       "raise --max-position-embeddings to at least 256, or shorten --seq-length"),
      ("--max-position-embeddings 128 is smaller than --decoder-seq-length 512",
       ("--max-position-embeddings", "--decoder-seq-length"),
       "raise --max-position-embeddings to at least 512, or shorten --decoder-seq-length")]),
    (["--num-layers", "2", "--hidden-size", "100", "--num-attention-heads", "3",
      "--max-position-embeddings", "128"],
     [("--hidden-size 100 is not divisible by --num-attention-heads 3",
       ("--hidden-size", "--num-attention-heads"),
       "use a head count that divides 100 (e.g. 20, 25, 50, 100), or set --kv-channels "
       "explicitly")]),
    (["--num-layers", "2", "--hidden-size", "384", "--num-attention-heads", "0",
      "--max-position-embeddings", "128"],
     [("--hidden-size 384 is not divisible by --num-attention-heads 0",
       ("--hidden-size", "--num-attention-heads"),
       "use a head count that divides 384 (e.g. 48, 64, 96, 128), or set --kv-channels "
       "explicitly")]),
    (["--hidden-size", "64", "--num-attention-heads", "4", "--max-position-embeddings", "128"],
     [("the number of layers is not set", ("--num-layers", "--encoder-num-layers"), LAYERS)]),
])
def test_each_shape_problem_whole(argv, expected):
    assert whole(argv, base=False) == expected


@pytest.mark.parametrize("argv, packages, expected", [
    (["--seq-length", "129"], {},
     [("--max-position-embeddings 128 is smaller than --seq-length 129",
       ("--max-position-embeddings", "--seq-length"),
       "raise --max-position-embeddings to at least 129, or shorten --seq-length")]),
    (["--fp32-residual-connection"], {},
     [("--fp32-residual-connection needs --fp16 or --bf16", ("--fp32-residual-connection",),
       "add --bf16 (or --fp16), or drop --fp32-residual-connection")]),
    (["--qk-clip", "--qk-clip-alpha", "1.0", "--qk-clip-threshold", "0"], {},
     [("--qk-clip-alpha 1.0 must lie strictly between 0 and 1", ("--qk-clip-alpha", "--qk-clip"),
       "use e.g. --qk-clip-alpha 0.5"),
      ("--qk-clip-threshold 0.0 must be positive", ("--qk-clip-threshold", "--qk-clip"),
       "use e.g. --qk-clip-threshold 100")]),
    (["--qk-clip"], {"transformer_engine": "2.8.0"},
     [("--qk-clip requires transformer_engine >= 2.9.0, found 2.8.0", ("--qk-clip",),
       "install Transformer Engine 2.9.0 or later, or drop --qk-clip")]),
    (["--no-position-embedding"], {},
     [("--no-position-embedding is deprecated",
       ("--no-position-embedding", "--position-embedding-type"),
       "use --position-embedding-type none (or rope) instead")]),
    (["--position-embedding-type", "relative", "--transformer-impl", "local"], {},
     [("--position-embedding-type relative is not supported with --transformer-impl local",
       ("--position-embedding-type", "--transformer-impl"),
       "use --transformer-impl transformer_engine")]),
    (["--position-embedding-type", "mrope"], {},
     [("--mrope-section should be set when using --position-embedding-type mrope",
       ("--mrope-section", "--position-embedding-type"),
       "add --mrope-section with one count per axis, e.g. --mrope-section 16 24 24")]),
    (["--attention-backend", "local"], {},
     [("--attention-backend local is only supported with --spec local",
       ("--attention-backend",), "add --spec local, or choose another --attention-backend")]),
    (["--attention-backend", "local", "--spec", "te"], {},
     [("--attention-backend local is only supported with --spec local",
       ("--attention-backend",), "add --spec local, or choose another --attention-backend")]),
    (["--wide-residual", "2", "--yaml-cfg", "x"], {},
     [("--wide-residual cannot be combined with --yaml-cfg", ("--wide-residual", "--yaml-cfg"),
       "configure wide residuals in the YAML file instead")]),
    (["--mtp-num-layers", "1"], {},
     [("multi-token prediction does not support --position-embedding-type learned_absolute",
       ("--position-embedding-type", "--mtp-num-layers"),
       "use --position-embedding-type rope or none, or drop the MTP layers")]),
    (["--encoder-num-layers", "3"], {},
     [("--num-layers 2 and --encoder-num-layers 3 cannot both be given",
       ("--num-layers", "--encoder-num-layers"), "give the layer count once, with --num-layers")]),
])
def test_each_problem_whole(argv, packages, expected):
    assert whole(argv, **packages) == expected


@pytest.mark.parametrize("argv, packages", [
    (["--seq-length", "128", "--decoder-seq-length", "128"], {}),
    (["--fp32-residual-connection", "--bf16"], {}),
    (["--fp32-residual-connection", "--fp16"], {}),
    (["--qk-clip", "--qk-clip-alpha", "0.01", "--qk-clip-threshold", "0.5"],
     {"transformer_engine": "2.9.0"}),
    (["--no-position-embedding", "--position-embedding-type", "rope"], {}),
    (["--position-embedding-type", "relative"], {}),
    (["--position-embedding-type", "mrope", "--mrope-section", "16", "24", "24"], {}),
    (["--attention-backend", "local", "--spec", "local"], {}),
    (["--wide-residual", "2"], {}),
    (["--mtp-num-layers", "1", "--position-embedding-type", "none"], {}),
    (["--mtp-num-layers", "0"], {}),
])
def test_near_misses_pass(argv, packages):
    assert resolve([*BASE, *argv], **packages).num_layers == 2


@pytest.mark.parametrize("alpha, rejected", [("0", True), ("0.001", False), ("0.999", False),
                                             ("1", True), ("-0.5", True)])
def test_qk_clip_alpha_lies_strictly_between_zero_and_one(alpha, rejected):
    argv = [*BASE, "--qk-clip", "--qk-clip-alpha", alpha]
    if rejected:
        assert [p.flags for p in problems(argv)] == [("--qk-clip-alpha", "--qk-clip")]
    else:
        assert resolve(argv).qk_clip_alpha == float(alpha)


@pytest.mark.parametrize("dest, argv, expected", [
    ("num_layers", [*SHAPE, "--encoder-num-layers", "3"],
     (3, "derived", "taken from --encoder-num-layers", ("encoder_num_layers",))),
    ("encoder_num_layers", BASE,
     (2, "derived", "same as the layer count", ("num_layers",))),
    ("ffn_hidden_size", BASE, (256, "derived", "4 x hidden size", ("hidden_size",))),
    ("ffn_hidden_size", [*BASE, "--swiglu"],
     (128, "derived", "2/3 of 4 x hidden size, a multiple of 64, for SwiGLU",
      ("hidden_size", "swiglu"))),
    ("kv_channels", BASE,
     (16, "derived", "hidden size / attention heads", ("hidden_size", "num_attention_heads"))),
    ("add_qkv_bias", BASE, (True, "derived", "linear layers have biases", ("add_bias_linear",))),
    ("bias_gelu_fusion", [*BASE, "--disable-bias-linear"],
     (False, "derived", "no linear biases (--disable-bias-linear)", ("add_bias_linear",))),
    ("position_embedding_type", [*BASE, "--use-rotary-position-embeddings"],
     ("rope", "derived", "--use-rotary-position-embeddings is the old spelling",
      ("use_rotary_position_embeddings",))),
    ("apply_rope_fusion", BASE,
     (False, "derived", "no rotary position embeddings", ("position_embedding_type",))),
    ("attention_softmax_in_fp32", [*BASE, "--apply-query-key-layer-scaling"],
     (True, "derived", "required by --apply-query-key-layer-scaling",
      ("apply_query_key_layer_scaling",))),
])
def test_each_derivation_provenance(dest, argv, expected):
    assert provenance(resolve(argv), dest) == expected


@pytest.mark.parametrize("dest, argv", [
    ("add_qkv_bias", [*BASE, "--disable-bias-linear"]),
    ("bias_gelu_fusion", BASE),
    ("apply_rope_fusion", [*BASE, "--position-embedding-type", "rope"]),
    ("attention_softmax_in_fp32", BASE),
    ("kv_channels", [*BASE, "--kv-channels", "8"]),
    ("ffn_hidden_size", [*BASE, "--ffn-hidden-size", "32"]),
])
def test_settings_left_alone(dest, argv):
    assert resolve(argv).source(dest).source in ("default", "command-line")


@pytest.mark.parametrize("hidden, expected", [(64, 128), (96, 256), (100, 256), (1024, 2688)])
def test_swiglu_width_rounds_down_to_a_multiple_of_64(hidden, expected):
    argv = ["--num-layers", "2", "--hidden-size", str(hidden), "--num-attention-heads", "4",
            "--max-position-embeddings", "128", "--swiglu"]
    assert resolve(argv).ffn_hidden_size == expected


@pytest.mark.parametrize("hidden, heads, examples", [("-64", "3", "8, 16, 32, 64"),
                                                      ("0", "0", "1")])
def test_the_head_count_hint_of_odd_widths(hidden, heads, examples):
    argv = ["--num-layers", "2", "--hidden-size", hidden, "--num-attention-heads", heads,
            "--max-position-embeddings", "128"]
    assert [p.hint for p in problems(argv)] == [
        f"use a head count that divides {hidden} (e.g. {examples}), or set --kv-channels "
        "explicitly"]


def test_hidden_state_mixing_below_two_mtp_layers_whole():
    resolved = resolve([*BASE, "--position-embedding-type", "rope", "--mtp-hsm",
                        "--mtp-num-layers", "1"])
    assert provenance(resolved, "mtp_hsm") == (
        False, "derived", "fewer than two MTP layers", ("mtp_num_layers",))
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings] == [
        ("--mtp-hsm needs at least two MTP layers to mix anything, but --mtp-num-layers is 1: "
         "hidden-state mixing is turned off", ("--mtp-hsm", "--mtp-num-layers"))]


def test_without_the_plugins_owning_fusions_and_softmax_nothing_is_set_for_them():
    import megaplug
    from megaplug.builtin import model

    kernel = megaplug.load([], environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"},
                           builtins=[model])[0]
    resolved = kernel.resolve([*BASE, "--disable-bias-linear",
                               "--apply-query-key-layer-scaling"], environ={})
    assert "bias_gelu_fusion" not in resolved and "apply_rope_fusion" not in resolved
    assert "attention_softmax_in_fp32" not in resolved


def test_a_missing_head_count_is_the_one_problem():
    assert whole(["--num-layers", "2", "--hidden-size", "64", "--max-position-embeddings", "128"],
                 base=False) == [("--num-attention-heads is required", ("--num-attention-heads",),
                                  "add --num-attention-heads 16")]


@pytest.mark.parametrize("hidden, heads, examples", [
    ("3", "2", "1, 3"),            # the smallest divisor, 1, is listed
    ("258", "5", "3, 6, 43, 86"),  # divisors listed up to 128 only
])
def test_the_head_count_hint_lists_small_divisors(hidden, heads, examples):
    argv = ["--num-layers", "2", "--hidden-size", hidden, "--num-attention-heads", heads,
            "--max-position-embeddings", "128"]
    assert [p.hint for p in problems(argv)] == [
        f"use a head count that divides {hidden} (e.g. {examples}), or set --kv-channels "
        "explicitly"]


def test_the_head_size_is_a_whole_number():
    assert type(resolve(BASE).kv_channels) is int


def test_a_pattern_with_a_foreign_character_says_what_is_allowed():
    from megaplug.builtin.model.types import moe_freq_type

    with pytest.raises(ValueError) as info:
        moe_freq_type("[1]*2-1")
    assert str(info.value) == ("invalid pattern '[1]*2-1': character '-' is not allowed (use "
                               "digits, commas, [ ], ( ), + and *)")


def test_the_old_rotary_spelling_with_rope_given_changes_nothing():
    resolved = resolve([*BASE, "--use-rotary-position-embeddings",
                        "--position-embedding-type", "rope"])
    assert resolved.source("position_embedding_type").source == "command-line"
