"""Checks of the model plugin: each a small function that reports through ``config.error``."""

from __future__ import annotations


from megaplug import Draft

from .types import AttnBackend

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

QK_CLIP_MIN_TE = "2.9.0"


def check_required_shape(config: Draft) -> None:
    """The model's width, head count and position range have no defaults."""
    for dest, example in (("hidden_size", "1024"), ("num_attention_heads", "16"),
                          ("max_position_embeddings", "a value >= --seq-length")):
        if config[dest] is None:
            config.error(f"{config.spelling(dest)} is required", flags=(dest,),
                         hint=f"add {config.spelling(dest)} {example}")


def check_positions_cover_sequence(config: Draft) -> None:
    """Position embeddings must reach the longest encoder and decoder sequence."""
    limit = config.max_position_embeddings
    if limit is None:
        return
    for dest in ("seq_length", "decoder_seq_length"):
        length = config.get(dest)
        if length is not None and limit < length:
            spelled = config.spelling(dest)
            config.error(
                f"--max-position-embeddings {limit} is smaller than {spelled} {length}",
                flags=("max_position_embeddings", dest),
                hint=f"raise --max-position-embeddings to at least {length}, or shorten {spelled}")


def check_fp32_residual_needs_half_precision(config: Draft) -> None:
    """An fp32 residual stream only makes sense when the rest runs in fp16 or bf16."""
    if config.fp32_residual_connection and not (config.get("fp16") or config.get("bf16")):
        config.error("--fp32-residual-connection needs --fp16 or --bf16",
                     flags=("fp32_residual_connection",),
                     hint="add --bf16 (or --fp16), or drop --fp32-residual-connection")


def check_qk_clip(config: Draft) -> None:
    """QK-clip needs a recent Transformer Engine and sensible alpha and threshold."""
    if not config.qk_clip:
        return
    problem = config.env.requirement_problem("transformer_engine", QK_CLIP_MIN_TE)
    if problem:
        config.error(f"--qk-clip {problem}", flags=("qk_clip",),
                     hint=f"install Transformer Engine {QK_CLIP_MIN_TE} or later, "
                          "or drop --qk-clip")
    if not 0.0 < config.qk_clip_alpha < 1.0:
        config.error(f"--qk-clip-alpha {config.qk_clip_alpha} must lie strictly between 0 and 1",
                     flags=("qk_clip_alpha", "qk_clip"), hint="use e.g. --qk-clip-alpha 0.5")
    if not config.qk_clip_threshold > 0:
        config.error(f"--qk-clip-threshold {config.qk_clip_threshold} must be positive",
                     flags=("qk_clip_threshold", "qk_clip"),
                     hint="use e.g. --qk-clip-threshold 100")


def check_no_position_embedding(config: Draft) -> None:
    """The deprecated ``--no-position-embedding`` is only accepted alongside rotary embeddings."""
    if not config.add_position_embedding and config.position_embedding_type != "rope":
        config.error("--no-position-embedding is deprecated",
                     flags=("add_position_embedding", "position_embedding_type"),
                     hint="use --position-embedding-type none (or rope) instead")


def check_relative_needs_transformer_engine(config: Draft) -> None:
    """Relative position embeddings are an attention bias only Transformer Engine supports."""
    impl = config.transformer_impl
    if config.position_embedding_type == "relative" and impl != "transformer_engine":
        config.error(f"--position-embedding-type relative is not supported with "
                     f"--transformer-impl {impl}",
                     flags=("position_embedding_type", "transformer_impl"),
                     hint="use --transformer-impl transformer_engine")


def check_mrope_section(config: Draft) -> None:
    """Multimodal RoPE needs to know how to split rotary dimensions among axes."""
    if config.position_embedding_type == "mrope" and config.mrope_section is None:
        config.error("--mrope-section should be set when using --position-embedding-type mrope",
                     flags=("mrope_section", "position_embedding_type"),
                     hint="add --mrope-section with one count per axis, "
                          "e.g. --mrope-section 16 24 24")


def check_local_attention_backend(config: Draft) -> None:
    """The ``local`` attention backend exists only in the local layer spec."""
    if config.attention_backend is not AttnBackend.local:
        return
    spec = config.get("spec")
    if not spec or spec[0] != "local":
        config.error("--attention-backend local is only supported with --spec local",
                     flags=("attention_backend",),
                     hint="add --spec local, or choose another --attention-backend")


def check_wide_residual_without_yaml(config: Draft) -> None:
    """A YAML model config replaces the command-line model flags, wide residuals included."""
    if config.wide_residual_num_streams is not None and config.get("yaml_cfg") is not None:
        config.error("--wide-residual cannot be combined with --yaml-cfg",
                     flags=("wide_residual_num_streams", "yaml_cfg"),
                     hint="configure wide residuals in the YAML file instead")


#: What legacy models (``--use-legacy-models``, Megatron up to 0.17) do not support: the
#: setting, the value that is refused (a predicate), and what the release says.
_NOT_IN_LEGACY_MODELS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("ckpt_format", lambda v: v != "torch", "legacy models support only --ckpt-format torch"),
    ("overlap_param_gather", bool, "--overlap-param-gather is supported only with MCore models"),
    ("decoupled_lr", lambda v: v is not None,
     "--decoupled-lr is not supported in legacy models"),
    ("decoupled_min_lr", lambda v: v is not None,
     "--decoupled-min-lr is not supported in legacy models"),
    ("rotary_interleaved", bool, "--rotary-interleaved is not supported in legacy models"),
    ("context_parallel_size", lambda v: v > 1,
     "context parallelism is not supported in legacy models"),
    ("mtp_num_layers", bool, "legacy models do not support multi-token prediction"),
)


def check_legacy_models(config: Draft) -> None:
    """Legacy models (a flag of Megatron up to 0.17) lack the newer features."""
    if not config.get("use_legacy_models"):
        return
    line = config.env.release_line("megatron_core")
    for name, refused, message in _NOT_IN_LEGACY_MODELS:
        if name in config and refused(config[name]):
            config.error(f"{message} (Megatron {line})", flags=(name, "use_legacy_models"),
                         hint=f"drop --use-legacy-models, or change {config.spelling(name)}")


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_legacy_models,
    check_required_shape,
    check_positions_cover_sequence,
    check_fp32_residual_needs_half_precision,
    check_qk_clip,
    check_no_position_embedding,
    check_relative_needs_transformer_engine,
    check_mrope_section,
    check_local_attention_backend,
    check_wide_residual_without_yaml,
)
