"""The model configuration Megatron builds from the validated arguments, read without building it.

``core_transformer_config_from_args`` copies most arguments into ``TransformerConfig`` by
name, but renames, merges and defaults a few (the experts count, the activation function,
query groups, fused-bias flags, ...), and ``__post_init__`` rewrites some values before
later checks read them (a negative capacity factor means none, ``--moe-layer-recompute``
becomes selective recomputation of ``moe``, ...). Each function here answers one such
question from the draft, so a check reads the value Megatron's check would see.

Settings of plugins that are not installed read as the model configuration's default.
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: ``TransformerConfig``'s default for recompute modules when none are given.
DEFAULT_RECOMPUTE_MODULES = ("core_attn",)

#: Deprecated attention-variant spellings, as ``TransformerConfig`` normalizes them.
ATTENTION_VARIANT_ALIASES = {"gated_delta_net": "gdn"}
GATED_DELTA_NET_VARIANTS = ("gdn", "gdn2")

#: The hybrid-pattern symbol of a DeepSeek sparse attention layer.
DSA_SYMBOL = "D"


def name_of(value: Any) -> Any:
    """An enum member's name (megaplug's enums print like Megatron's), other values as they are."""
    return getattr(value, "name", value)


def names_of(values: Any) -> list[Any]:
    """Every element's name, for list settings holding enum members or strings."""
    if values is None:
        return []
    if isinstance(values, (list, tuple, set)):
        return [name_of(v) for v in values]
    return [name_of(values)]


def experts(config: Draft) -> int | None:
    """``num_moe_experts``: the ``--num-experts`` value (None for a dense model)."""
    return config.get("num_experts")


def activation(config: Draft) -> str:
    """The MLP's activation function, as Megatron chooses it from the activation flags."""
    if config.get("squared_relu"):
        return "squared_relu"
    if config.get("quick_geglu"):
        return "quick_gelu"
    if config.get("swiglu"):
        return "silu"
    return "gelu"


def activation_flag(config: Draft) -> str | None:
    """The dest of the flag that chose the activation, for messages (None for GeLU)."""
    for dest in ("squared_relu", "quick_geglu", "swiglu"):
        if config.get(dest):
            return dest
    return None


def gated_linear_unit(config: Draft) -> bool:
    """SwiGLU and quick-GeGLU are gated linear units."""
    return bool(config.get("swiglu")) or bool(config.get("quick_geglu"))


def bias_activation_fusion_dest(config: Draft) -> str:
    """The flag Megatron takes ``bias_activation_fusion`` from: SwiGLU's, or GeLU's."""
    return "bias_swiglu_fusion" if config.get("swiglu") else "bias_gelu_fusion"


def bias_activation_fusion(config: Draft) -> bool:
    return bool(config.get(bias_activation_fusion_dest(config)))


def query_groups(config: Draft) -> int | None:
    """Query groups: ``--num-query-groups`` with grouped-query attention, else one per head."""
    groups = config.get("num_query_groups") if config.get("group_query_attention") else None
    return config.get("num_attention_heads") if groups is None else groups


def attention_variant(config: Draft) -> str | None:
    """The experimental attention variant, canonical spelling; DSA when the pattern has it."""
    variant = config.get("experimental_attention_variant")
    pattern = config.get("hybrid_layer_pattern")
    if pattern is not None and DSA_SYMBOL in pattern:
        variant = "dsa"
    return ATTENTION_VARIANT_ALIASES.get(variant, variant)


def is_gated_delta_net(config: Draft) -> bool:
    return attention_variant(config) in GATED_DELTA_NET_VARIANTS


def multi_latent_attention(config: Draft) -> bool:
    return bool(config.get("multi_latent_attention"))


def rope_type(config: Draft) -> str | None:
    """MLA's RoPE type (``yarn`` unless given); standard attention has no such setting."""
    given = config.get("rope_type")
    if multi_latent_attention(config):
        return "yarn" if given is None else given
    return given


def cp_comm_types(config: Draft) -> list[Any]:
    """Context-parallel communication types: one for all layers, or one per layer."""
    value = config.get("cp_comm_type")
    if value is None:
        return [None]
    return list(value) if isinstance(value, (list, tuple)) else [value]


def recompute_modules(config: Draft) -> list[str]:
    """Recompute modules before ``--moe-layer-recompute`` adds ``moe``."""
    modules = config.get("recompute_modules")
    return list(DEFAULT_RECOMPUTE_MODULES) if modules is None else names_of(modules)


def recompute_granularity_final(config: Draft) -> str | None:
    """The granularity after ``--moe-layer-recompute`` turned it to ``selective``."""
    if config.get("moe_layer_recompute"):
        return "selective"
    return config.get("recompute_granularity")


def recompute_modules_final(config: Draft) -> list[str]:
    """Recompute modules after ``--moe-layer-recompute`` added ``moe``."""
    modules = recompute_modules(config)
    if config.get("moe_layer_recompute") and "moe" not in modules:
        modules.append("moe")
    return modules


def offload_modules(config: Draft) -> list[str]:
    return names_of(config.get("offload_modules"))


def cpu_offloading(config: Draft) -> bool:
    """CPU offloading is on when some layers are offloaded."""
    return (config.get("cpu_offloading_num_layers") or 0) > 0


def padding_for_quantization(config: Draft) -> bool:
    """``--moe-router-padding-for-fp8`` is the old spelling of the quantization padding."""
    return bool(config.get("moe_router_padding_for_quantization")) or bool(
        config.get("moe_router_padding_for_fp8"))


def padding_for_quantization_dest(config: Draft) -> str:
    if config.get("moe_router_padding_for_quantization"):
        return "moe_router_padding_for_quantization"
    return "moe_router_padding_for_fp8"


def capacity_factor(config: Draft) -> float | None:
    """The expert capacity factor; a negative one means no capacity limit."""
    factor = config.get("moe_expert_capacity_factor")
    return None if factor is not None and factor < 0 else factor


def load_balancing_types(config: Draft) -> list[str]:
    value = config.get("moe_router_load_balancing_type", "aux_loss")
    return list(value) if isinstance(value, (list, tuple)) else [value]


def flex_backend(config: Draft) -> str:
    """The flex dispatcher's backend; ``--moe-enable-deepep`` selects DeepEP."""
    if config.get("moe_enable_deepep"):
        return "deepep"
    return config.get("moe_flex_dispatcher_backend", "deepep")


def uses_grouped_tensor(config: Draft) -> bool:
    """Grouped tensors are turned on by the TE op fuser together with grouped GEMM."""
    return bool(config.get("moe_use_grouped_tensor")) or (
        bool(config.get("use_transformer_engine_op_fuser"))
        and bool(config.get("moe_grouped_gemm")))


def cuda_graph_modules(config: Draft) -> list[str]:
    """CUDA-graph modules by name; the local implementation graphs router and preprocess
    together, so either one brings the other."""
    modules = names_of(config.get("cuda_graph_modules"))
    if config.get("cuda_graph_impl", "none") == "local" and (
            "moe_router" in modules or "moe_preprocess" in modules):
        for name in ("moe_router", "moe_preprocess"):
            if name not in modules:
                modules.append(name)
    return modules


def whole_layer_cuda_graph(config: Draft) -> bool:
    """A full-iteration graph, or a per-layer graph of the whole layer (no modules named)."""
    return config.get("cuda_graph_impl", "none") == "full_iteration" or not cuda_graph_modules(
        config)


def layers_per_pipeline_stage(config: Draft) -> int | None:
    """``num_layers // pipeline_model_parallel_size``, as Megatron computes it.

    None while the layer count is unknown (no plugin declares it, or nothing set it)."""
    layers = config.get("num_layers")
    if layers is None:
        return None
    return layers // max(config.get("pipeline_model_parallel_size", 1), 1)


def fp8_on(config: Draft) -> bool:
    return bool(config.get("fp8"))


def fp4_on(config: Draft) -> bool:
    return bool(config.get("fp4"))
