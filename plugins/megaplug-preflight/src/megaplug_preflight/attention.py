"""Attention: heads and query groups over tensor-parallel ranks, RoPE, MLA, DSA, gated delta net."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import divisors, reject, shown, spoken, te_shortfall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Transformer Engine versions that provide the fused RoPE kernels, and interleaved fused RoPE.
ROPE_FUSION_MIN_TE = "1.4"
INTERLEAVED_ROPE_FUSION_MIN_TE = "2.3"

#: The packages each fused DSA kernel backend imports.
DSA_KERNEL_PACKAGES = {"tilelang": ("tilelang",), "cudnn": ("flash_mla", "cudnn")}

#: The linear-attention shapes a gated delta net layer needs.
GATED_DELTA_NET_SHAPES = ("linear_conv_kernel_dim", "linear_key_head_dim",
                          "linear_value_head_dim", "linear_num_key_heads",
                          "linear_num_value_heads")


def heads_divide_over_tensor_parallel_ranks(config: Draft) -> None:
    """Each tensor-parallel rank holds the same number of attention heads."""
    heads, tp = config.get("num_attention_heads"), config.get("tensor_model_parallel_size", 1)
    if heads is None or not tp or heads % tp == 0:
        return
    reject(config, f"{shown(config, 'num_attention_heads')} cannot be split over "
                   f"{shown(config, 'tensor_model_parallel_size')}",
           flags=("num_attention_heads", "tensor_model_parallel_size"),
           hint=f"use a multiple of {tp} heads, or a tensor parallel size that divides "
                f"{heads}: {spoken(divisors(heads))}")


def query_groups_fit_tensor_parallel_ranks(config: Draft) -> None:
    """Query groups are split over tensor-parallel ranks, or replicated across them."""
    if not config.get("group_query_attention"):
        return  # one group per head: heads_divide_over_tensor_parallel_ranks covers it
    groups, tp = view.query_groups(config), config.get("tensor_model_parallel_size", 1)
    if groups is None or not tp or groups % tp == 0 or (groups and tp % groups == 0):
        return
    reject(config, f"{shown(config, 'num_query_groups', groups)} is neither a multiple nor a "
                   f"divisor of {shown(config, 'tensor_model_parallel_size')}",
           flags=("num_query_groups", "tensor_model_parallel_size"),
           hint=f"use a query-group count that is a multiple or a divisor of {tp}")


def gated_delta_net_needs_layer_frequency(config: Draft) -> None:
    """A GDN model interleaves linear attention at ``--linear-attention-freq``."""
    if view.attention_variant(config) == "gdn" and config.get("linear_attention_freq") is None:
        reject(config, "the gated delta net attention variant needs --linear-attention-freq",
               flags=("experimental_attention_variant", "linear_attention_freq"),
               hint="set --linear-attention-freq (every N-th layer uses standard attention)")


def gated_delta_net_needs_shapes(config: Draft) -> None:
    """Gated delta net layers are sized by five linear-attention flags."""
    if not view.is_gated_delta_net(config):
        return
    missing = [dest for dest in GATED_DELTA_NET_SHAPES if config.get(dest) is None]
    if missing:
        names = ", ".join(config.spelling(dest) for dest in missing)
        reject(config, f"gated delta net attention needs {names}",
               flags=("experimental_attention_variant", *missing),
               hint="set every linear-attention size flag")


def gated_delta_net_value_heads_group_key_heads(config: Draft) -> None:
    """Each key head serves a whole number of value heads."""
    keys, values = config.get("linear_num_key_heads"), config.get("linear_num_value_heads")
    if not view.is_gated_delta_net(config) or keys is None or values is None:
        return
    if keys == 0 or values % keys:
        reject(config, f"{shown(config, 'linear_num_value_heads')} is not a multiple of "
                       f"{shown(config, 'linear_num_key_heads')}",
               flags=("linear_num_value_heads", "linear_num_key_heads"),
               hint="use a value-head count that is a multiple of the key-head count")


def gated_delta_net_heads_divide_over_ranks(config: Draft) -> None:
    """Linear-attention heads are split over tensor- and context-parallel ranks together."""
    if not view.is_gated_delta_net(config):
        return
    ranks = config.get("tensor_model_parallel_size", 1) * config.get("context_parallel_size", 1)
    for dest in ("linear_num_key_heads", "linear_num_value_heads"):
        heads = config.get(dest)
        if heads is not None and ranks and heads % ranks:
            reject(config, f"{shown(config, dest)} cannot be split over tensor x context "
                           f"parallel ranks ({ranks})",
                   flags=(dest, "tensor_model_parallel_size", "context_parallel_size"),
                   hint=f"use a multiple of {ranks} heads, or smaller parallel sizes")


def dsa_kernel_backend_available(config: Draft) -> None:
    """A fused DSA kernel backend needs a GPU and its kernel packages."""
    backend = config.get("dsa_kernel_backend", "none")
    if view.attention_variant(config) != "dsa" or backend in (None, "none"):
        return
    if config.env.capability() is None:
        reject(config, f"{shown(config, 'dsa_kernel_backend')} needs a CUDA device, and the "
                       "target has none",
               flags=("dsa_kernel_backend",),
               hint="use --dsa-kernel-backend none, or state the target GPU with "
                    "--assume-device-capability")
        return
    missing = [p for p in DSA_KERNEL_PACKAGES.get(backend, ())
               if config.env.package_version(p) is None]
    if missing:
        reject(config, f"{shown(config, 'dsa_kernel_backend')} needs {', '.join(missing)}, "
                       "not installed",
               flags=("dsa_kernel_backend",),
               hint="install the kernel packages, or use --dsa-kernel-backend none")


def dsa_without_linear_bias(config: Draft) -> None:
    """DeepSeek sparse attention uses absorbed MLA projections, which have no bias."""
    if view.attention_variant(config) == "dsa" and config.get("add_bias_linear"):
        reject(config, "DeepSeek sparse attention (DSA) needs linear layers without bias, and "
                       "--add-bias-linear is on (the default)",
               flags=("experimental_attention_variant", "add_bias_linear"),
               hint="add --disable-bias-linear")


def dsa_indexer_settings_in_range(config: Draft) -> None:
    """The indexer's top-k frequency is positive and its skip offset non-negative."""
    if view.attention_variant(config) != "dsa":
        return
    freq = config.get("dsa_indexer_topk_freq", 1)
    if freq is not None and freq < 1:
        reject(config, f"{shown(config, 'dsa_indexer_topk_freq')} must be 1 or more",
               flags=("dsa_indexer_topk_freq",), hint="use a positive frequency")
    offset = config.get("dsa_indexer_skip_topk_offset", 0)
    if offset is not None and offset < 0:
        reject(config, f"{shown(config, 'dsa_indexer_skip_topk_offset')} must not be negative",
               flags=("dsa_indexer_skip_topk_offset",), hint="use 0 or a positive offset")


def dsa_without_rope_fusion(config: Draft) -> None:
    """DSA attention has no fused RoPE path."""
    if view.attention_variant(config) == "dsa" and config.get("apply_rope_fusion"):
        reject(config, "DeepSeek sparse attention (DSA) does not support RoPE fusion, which is "
                       "on (the default)",
               flags=("experimental_attention_variant", "apply_rope_fusion"),
               hint="add --no-rope-fusion")


def dsa_context_parallel_all_gather(config: Draft) -> None:
    """DSA's context parallelism only exchanges keys and values by all-gather."""
    if view.attention_variant(config) != "dsa" or config.get("context_parallel_size", 1) <= 1:
        return
    kinds = view.cp_comm_types(config)
    if not all(kind is not None and kind.replace("_", "").lower() == "allgather"
               for kind in kinds):
        reject(config, f"DeepSeek sparse attention (DSA) with context parallelism supports only "
                       f"--cp-comm-type all_gather, got {' '.join(map(str, kinds))}",
               flags=("cp_comm_type", "context_parallel_size"),
               hint="use --cp-comm-type all_gather")


def rope_type_needs_mla(config: Draft) -> None:
    """Standard attention only knows plain RoPE; ``--rope-type yarn`` is for MLA."""
    given = config.get("rope_type")
    if given is not None and given != "rope" and not view.multi_latent_attention(config):
        reject(config, f"{shown(config, 'rope_type')} needs --multi-latent-attention; standard "
                       "attention supports only --rope-type rope",
               flags=("rope_type", "multi_latent_attention"),
               hint="drop --rope-type (use --position-embedding-type yarn for YaRN), or add "
                    "--multi-latent-attention")


def _fused_rope_applies(config: Draft) -> bool:
    return bool(config.get("apply_rope_fusion")) and not view.multi_latent_attention(config)


def rope_fusion_kernels_available(config: Draft) -> None:
    """Fused RoPE kernels come from Transformer Engine."""
    if not _fused_rope_applies(config):
        return
    problem = te_shortfall(config, ROPE_FUSION_MIN_TE)
    if problem:
        reject(config, f"RoPE fusion (on by default) {problem}",
               flags=("apply_rope_fusion", "position_embedding_type"),
               hint="add --no-rope-fusion, or install Transformer Engine")


def interleaved_rope_fusion_needs_recent_te(config: Draft) -> None:
    """Interleaved rotary embeddings are fused only by Transformer Engine 2.3 or newer."""
    if not _fused_rope_applies(config) or not config.get("rotary_interleaved"):
        return
    if config.env.package_version("transformer_engine") is None:
        return  # reported (or warned about) by rope_fusion_kernels_available
    problem = config.env.requirement_problem("transformer_engine",
                                             INTERLEAVED_ROPE_FUSION_MIN_TE)
    if problem:
        reject(config, f"--rotary-interleaved with RoPE fusion {problem}",
               flags=("rotary_interleaved", "apply_rope_fusion"),
               hint="add --no-rope-fusion, or upgrade Transformer Engine")


def mla_without_interleaved_rope(config: Draft) -> None:
    """Multi-latent attention applies RoPE to its own layout, never interleaved."""
    if view.multi_latent_attention(config) and config.get("rotary_interleaved"):
        reject(config, "--rotary-interleaved does not work with --multi-latent-attention",
               flags=("rotary_interleaved", "multi_latent_attention"),
               hint="drop --rotary-interleaved")


def mla_rope_fusion_needs_yarn(config: Draft) -> None:
    """MLA's fused RoPE kernel implements YaRN only."""
    if (view.multi_latent_attention(config) and config.get("apply_rope_fusion")
            and view.rope_type(config) != "yarn"):
        reject(config, f"RoPE fusion (on by default) with --multi-latent-attention needs "
                       f"--rope-type yarn, got {view.rope_type(config)}",
               flags=("apply_rope_fusion", "rope_type", "multi_latent_attention"),
               hint="add --no-rope-fusion, or use --rope-type yarn")


def mla_without_output_gate(config: Draft) -> None:
    """MLA has no attention output gate yet."""
    if view.multi_latent_attention(config) and config.get("attention_output_gate"):
        reject(config, "--attention-output-gate is not supported with --multi-latent-attention",
               flags=("attention_output_gate", "multi_latent_attention"),
               hint="drop --attention-output-gate")


def mla_latent_cache_without_rope_fusion(config: Draft) -> None:
    """Cached MLA latents are rotated unfused."""
    if (view.multi_latent_attention(config) and config.get("cache_mla_latents")
            and config.get("apply_rope_fusion")):
        reject(config, "--cache-mla-latents does not work with RoPE fusion (on by default)",
               flags=("cache_mla_latents", "apply_rope_fusion"),
               hint="add --no-rope-fusion")


def heterogeneous_layers_without_mla(config: Draft) -> None:
    """Heterogeneous layer configurations build standard attention only."""
    if config.get("heterogeneous_layers_config_path") is not None and \
            view.multi_latent_attention(config):
        reject(config, "--heterogeneous-layers-config-path does not support "
                       "--multi-latent-attention",
               flags=("heterogeneous_layers_config_path", "multi_latent_attention"),
               hint="drop one of the two")


def no_rope_layers_fit_the_model(config: Draft) -> None:
    """``--no-rope-freq`` marks layers without RoPE: a period dividing the layer count, or a
    0/1 flag per layer; flash decoding cannot skip RoPE."""
    freq = config.get("no_rope_freq")
    if not freq:
        return
    if config.get("flash_decode"):
        reject(config, "--no-rope-freq does not work with --flash-decode",
               flags=("no_rope_freq", "flash_decode"), hint="drop one of the two")
    num_layers = config.get("num_layers")
    if num_layers is None:
        return
    if isinstance(freq, int) and num_layers % freq:
        reject(config, f"{shown(config, 'no_rope_freq')} does not divide "
                       f"{shown(config, 'num_layers')}",
               flags=("no_rope_freq", "num_layers"),
               hint=f"use a period that divides {num_layers}: {spoken(divisors(num_layers))}")
    elif isinstance(freq, list) and len(freq) != num_layers:
        reject(config, f"--no-rope-freq lists {len(freq)} layers, but the model has "
                       f"{shown(config, 'num_layers')}",
               flags=("no_rope_freq", "num_layers"),
               hint=f"give one 0/1 flag per layer ({num_layers})")


def gated_delta_product_householder_count(config: Draft) -> None:
    count = config.get("gdp_num_householder", 3)
    if count is not None and count < 1:
        reject(config, f"{shown(config, 'gdp_num_householder')} must be 1 or more",
               flags=("gdp_num_householder",), hint="use at least one Householder reflection")


def mup_base_hidden_size_positive(config: Draft) -> None:
    """MuP scales widths relative to a positive base width."""
    base = config.get("mup_base_hidden_size")
    if config.get("use_mup") and base is not None and base <= 0:
        reject(config, f"{shown(config, 'mup_base_hidden_size')} must be positive",
               flags=("mup_base_hidden_size", "use_mup"),
               hint="give the base model's hidden size, or leave it unset")


CHECKS: tuple[Check, ...] = (
    heads_divide_over_tensor_parallel_ranks,
    query_groups_fit_tensor_parallel_ranks,
    gated_delta_net_needs_layer_frequency,
    gated_delta_net_needs_shapes,
    gated_delta_net_value_heads_group_key_heads,
    gated_delta_net_heads_divide_over_ranks,
    gated_delta_product_householder_count,
    dsa_kernel_backend_available,
    dsa_without_linear_bias,
    dsa_indexer_settings_in_range,
    dsa_without_rope_fusion,
    dsa_context_parallel_all_gather,
    rope_type_needs_mla,
    rope_fusion_kernels_available,
    interleaved_rope_fusion_needs_recent_te,
    mla_without_interleaved_rope,
    mla_rope_fusion_needs_yarn,
    mla_without_output_gate,
    mla_latent_cache_without_rope_fusion,
    heterogeneous_layers_without_mla,
    no_rope_layers_fit_the_model,
    mup_base_hidden_size_positive,
)
