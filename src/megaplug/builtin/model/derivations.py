"""Values the model plugin computes, in the order Megatron's ``validate_args`` does.

Each step is a small function of the draft. A few checks live here rather than in
``checks.py`` because Megatron makes them before a later step changes a value they read
(the first MTP check sees ``--position-embedding-type`` before the deprecated
``--use-rotary-position-embeddings`` rewrites it).
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: Position embeddings MTP accepts. Megatron checks this for every model, first; its later,
#: wider list (learned_absolute, mrope) can therefore never let more through.
EARLY_MTP_POSITION_TYPES = ("rope", "none")


def check_early_mtp_position_embedding(config: Draft) -> None:
    """Models with MTP layers need rotary or no position embeddings (and, in Megatron 0.13,
    no context parallelism)."""
    if not config.mtp_num_layers:
        return
    kind = config.position_embedding_type
    if kind not in EARLY_MTP_POSITION_TYPES:
        config.error(
            f"multi-token prediction does not support --position-embedding-type {kind}",
            flags=("position_embedding_type", "mtp_num_layers"),
            hint="use --position-embedding-type rope or none, or drop the MTP layers")
    context_parallel = config.get("context_parallel_size", 1)
    if context_parallel > 1 and config.env.megatron.before("0.14.0"):
        config.error(f"multi-token prediction does not support context parallelism "
                     f"(--context-parallel-size {context_parallel}) in Megatron 0.13",
                     flags=("mtp_num_layers", "context_parallel_size"),
                     hint="use --context-parallel-size 1, or drop the MTP layers")


def disable_hidden_state_mixing_below_two_mtp_layers(config: Draft) -> None:
    """Hidden-state mixing needs two MTP layers; below that it is turned off, with a warning.

    There is nothing to mix, and Megatron turns it off rather than refusing."""
    layers = config.mtp_num_layers
    if not config.mtp_hsm or (layers and layers >= 2):
        return
    config.warn(f"--mtp-hsm needs at least two MTP layers to mix anything, but "
                f"--mtp-num-layers is {layers}: hidden-state mixing is turned off",
                flags=("mtp_hsm", "mtp_num_layers"))
    config.set("mtp_hsm", False, reason="fewer than two MTP layers", inputs=("mtp_num_layers",))


def derive_layer_counts(config: Draft) -> None:
    """``--num-layers`` and ``--encoder-num-layers`` name the same count; fill the missing one."""
    num_layers, encoder = config.num_layers, config.encoder_num_layers
    if num_layers is not None:
        if encoder is not None:
            config.error(
                f"--num-layers {num_layers} and --encoder-num-layers {encoder} "
                "cannot both be given",
                flags=("num_layers", "encoder_num_layers"),
                hint="give the layer count once, with --num-layers")
            return
        if encoder != num_layers:
            config.set("encoder_num_layers", num_layers, reason="same as the layer count",
                       inputs=("num_layers",))
        return
    if encoder is None:
        config.error("the number of layers is not set",
                     flags=("num_layers", "encoder_num_layers"),
                     hint="add --num-layers N "
                          "(or --encoder-num-layers N for encoder-decoder models)")
        return
    config.set("num_layers", encoder, reason="taken from --encoder-num-layers",
               inputs=("encoder_num_layers",))


def swiglu_ffn_hidden_size(hidden_size: int) -> int:
    """SwiGLU's MLP has two input projections, so its width is 2/3 of 4h, rounded down to 64."""
    return int((4 * hidden_size * 2 / 3) / 64) * 64


def derive_ffn_hidden_size(config: Draft) -> None:
    """Default the MLP width to 4h, or the SwiGLU rule when ``--swiglu`` is on."""
    hidden = config.hidden_size
    if config.ffn_hidden_size is not None or hidden is None:
        return
    if config.swiglu:
        config.set("ffn_hidden_size", swiglu_ffn_hidden_size(hidden),
                   reason="2/3 of 4 x hidden size, a multiple of 64, for SwiGLU",
                   inputs=("hidden_size", "swiglu"))
    else:
        config.set("ffn_hidden_size", 4 * hidden, reason="4 x hidden size",
                   inputs=("hidden_size",))


def derive_kv_channels(config: Draft) -> None:
    """Default the head size to hidden size / heads, which must divide evenly."""
    hidden, heads = config.hidden_size, config.num_attention_heads
    if config.kv_channels is not None or hidden is None or heads is None:
        return
    # Python's modulo, as Megatron's assert computes it (only 0 heads cannot divide)
    if heads == 0 or hidden % heads:
        divisors = [n for n in range(1, min(abs(hidden), 128) + 1) if hidden % n == 0] or [1]
        config.error(
            f"--hidden-size {hidden} is not divisible by --num-attention-heads {heads}",
            flags=("hidden_size", "num_attention_heads"),
            hint=f"use a head count that divides {hidden} "
                 f"(e.g. {', '.join(map(str, divisors[-4:]))}), "
                 "or set --kv-channels explicitly")
        return
    config.set("kv_channels", hidden // heads, reason="hidden size / attention heads",
               inputs=("hidden_size", "num_attention_heads"))


def derive_biases(config: Draft) -> None:
    """Without linear biases there is no bias to fuse; with them the QKV bias is on too."""
    if not config.add_bias_linear:
        _set_foreign(config, "bias_gelu_fusion", False, "no linear biases (--disable-bias-linear)",
                     ("add_bias_linear",))
    elif not config.add_qkv_bias:
        config.set("add_qkv_bias", True, reason="linear layers have biases",
                   inputs=("add_bias_linear",))


def derive_rotary(config: Draft) -> None:
    """Map the deprecated rotary flag to ``rope``; RoPE fusion needs rotary embeddings."""
    if config.use_rotary_position_embeddings and config.position_embedding_type != "rope":
        config.set("position_embedding_type", "rope",
                   reason="--use-rotary-position-embeddings is the old spelling",
                   inputs=("use_rotary_position_embeddings",))
    if config.env.megatron.before("0.14.0"):
        check_early_interleaved_rotary(config)
    if config.position_embedding_type != "rope":
        _set_foreign(config, "apply_rope_fusion", False, "no rotary position embeddings",
                     ("position_embedding_type",))


def check_early_interleaved_rotary(config: Draft) -> None:
    """Interleaved rotary embeddings are refused with RoPE fusion (0.13).

    Megatron 0.13 refuses interleaved rotary embeddings with RoPE fusion -- asked before
    fusion is turned off for other position embeddings, so whatever the embedding."""
    if config.rotary_interleaved and config.get("apply_rope_fusion"):
        config.error("--rotary-interleaved does not work with RoPE fusion in Megatron 0.13",
                     flags=("rotary_interleaved", "apply_rope_fusion"),
                     hint="add --no-rope-fusion")


def derive_softmax_precision(config: Draft) -> None:
    """Query-key layer scaling only works with the attention softmax in fp32."""
    if config.apply_query_key_layer_scaling:
        _set_foreign(config, "attention_softmax_in_fp32", True,
                     "required by --apply-query-key-layer-scaling",
                     ("apply_query_key_layer_scaling",))


def _set_foreign(config: Draft, dest: str, value: Any, reason: str,
                 inputs: tuple[str, ...]) -> None:
    """Set a setting another plugin declares, when that plugin is installed."""
    if dest in config and config[dest] != value:
        config.set(dest, value, reason=reason, inputs=inputs)


DERIVE: tuple[Callable[[Draft], None], ...] = (
    check_early_mtp_position_embedding,
    disable_hidden_state_mixing_below_two_mtp_layers,
    derive_layer_counts,
    derive_ffn_hidden_size,
    derive_kv_channels,
    derive_biases,
    derive_rotary,
    derive_softmax_precision,
)
