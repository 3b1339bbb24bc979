"""``megaplug import hf CONFIG.json|MODEL_DIR``: a Hugging Face model's architecture as
Megatron-LM flags.

Modelled on Megatron-Bridge's own model bridges (``megatron/bridge/models/*/*_bridge.py``):
the fields every bridge maps (``MegatronModelBridge.CONFIG_MAPPING``) are :data:`COMMON`,
and each family's ``provider_bridge`` settings are a small function in :data:`FAMILIES`.
The file is read through transformers' config class for its ``model_type`` when
transformers is installed (which fills the family's defaults for absent fields), as plain
JSON otherwise -- said in the result. A field neither mapped nor known to be no
architecture setting is named, never dropped; so is an unknown ``model_type``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

#: HF field -> (megaplug setting, how the value is carried): ``same``, or ``negated``.
#: Bridge's CONFIG_MAPPING, in Megatron-LM's flag names.
COMMON: dict[str, tuple[str, str]] = {
    "num_hidden_layers": ("num_layers", "same"),
    "hidden_size": ("hidden_size", "same"),
    "intermediate_size": ("ffn_hidden_size", "same"),
    "num_attention_heads": ("num_attention_heads", "same"),
    "num_key_value_heads": ("num_query_groups", "same"),
    "head_dim": ("kv_channels", "same"),
    "vocab_size": ("vocab_size", "same"),
    "max_position_embeddings": ("max_position_embeddings", "same"),
    "rms_norm_eps": ("layernorm_epsilon", "same"),
    "initializer_range": ("init_method_std", "same"),
    "attention_dropout": ("attention_dropout", "same"),
    "hidden_dropout": ("hidden_dropout", "same"),
    "tie_word_embeddings": ("untie_embeddings_and_output_weights", "negated"),
    "attention_bias": ("add_qkv_bias", "same"),
    "mlp_bias": ("add_bias_linear", "same"),
    "rope_theta": ("rotary_base", "same"),
    "partial_rotary_factor": ("rotary_percent", "same"),
    "num_local_experts": ("num_experts", "same"),
    "num_experts": ("num_experts", "same"),
    "num_experts_per_tok": ("moe_router_topk", "same"),
    "moe_intermediate_size": ("moe_ffn_hidden_size", "same"),
    "router_aux_loss_coef": ("moe_aux_loss_coeff", "same"),
    "shared_expert_intermediate_size": ("moe_shared_expert_intermediate_size", "same"),
}

#: Fields that are no architecture setting of a training launch, and why they are left.
NOT_ARCHITECTURE: dict[str, str] = {
    "architectures": "the HF model class", "model_type": "chooses the family",
    "transformers_version": "the writer's version", "torch_dtype": "read as --bf16/--fp16",
    "dtype": "read as --bf16/--fp16", "use_cache": "inference only",
    "bos_token_id": "the tokenizer's", "eos_token_id": "the tokenizer's",
    "pad_token_id": "the tokenizer's", "pretraining_tp": "HF's own TP emulation",
    "output_router_logits": "inference only", "hidden_act": "read by the family",
    "rope_scaling": "read by the family", "rope_parameters": "read as --rotary-base",
    "n_layer": "read by the family", "n_embd": "read by the family",
    "n_head": "read by the family", "n_positions": "read by the family",
    "n_inner": "read by the family", "layer_norm_epsilon": "read by the family",
    "auto_map": "the remote code's classes", "quantization_config": "the checkpoint's storage",
    "ep_size": "HF's own expert parallelism", "cache_implementation": "inference only",
    "hidden_activation": "read by the family",
    **{field: "transformers' own setting of every config class, no architecture" for field in (
        "_name_or_path", "chunk_size_feed_forward", "id2label", "label2id",
        "is_encoder_decoder", "output_attentions", "output_hidden_states", "problem_type",
        "return_dict")},
    **{field: "GPT-2's sequence-summary head (GPT2DoubleHeadsModel), no causal LM's" for field in (
        "summary_type", "summary_use_proj", "summary_activation", "summary_proj_to_labels",
        "summary_first_dropout")},
}
_DEEPSEEK = ("deepseek_v2", "deepseek_v3")
_GEMMA = ("gemma2", "gemma3_text")
_QWEN = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")
#: Fields a family's function reads (Mistral's window, DeepSeek's MLA ranks), by the
#: families reading them; in any other family such a field is named as unmapped.
_READ_BY: dict[str, tuple[str, ...]] = {
    "sliding_window": ("mistral", "mixtral", "phi3", *_GEMMA, *_QWEN),
    **{field: _DEEPSEEK for field in (
        "n_routed_experts", "n_shared_experts", "n_group", "topk_group", "topk_method",
        "scoring_func", "routed_scaling_factor", "first_k_dense_replace", "moe_layer_freq",
        "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "num_nextn_predict_layers", "aux_loss_alpha", "seq_aux")},
    **{field: _GEMMA for field in (
        "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
        "sliding_window_pattern", "_sliding_window_pattern", "rope_local_base_freq")},
    **{field: ("phi3", "gpt2") for field in ("resid_pdrop", "embd_pdrop")},
    "original_max_position_embeddings": ("phi3",),
    "router_jitter_noise": ("mixtral",), "use_bidirectional_attention": _GEMMA,
    "qk_head_dim": _DEEPSEEK, "rope_interleave": _DEEPSEEK,
    **{field: _QWEN for field in ("use_sliding_window", "max_window_layers")},
    "layer_types": (*_QWEN, *_GEMMA),
    **{field: ("qwen2_moe", "qwen3_moe") for field in (
        "decoder_sparse_step", "mlp_only_layers", "qkv_bias")},
    "norm_topk_prob": ("qwen2_moe", "qwen3_moe", *_DEEPSEEK),
    **{field: ("gpt2",) for field in (
        "activation_function", "attn_pdrop", "add_cross_attention", "scale_attn_weights",
        "scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn")},
}


def _llama(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """LlamaBridge: RMSNorm, SwiGLU, RoPE; llama3 rope scaling, linear interpolation."""
    _gated_rope(settings)
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind == "llama3":
        settings["use_rope_scaling"] = True
        settings["rope_scaling_factor"] = scaling.get("factor", 8.0)
        # Megatron-LM's llama3 scaling fixes the rest at Llama 3.1's own values
        for field, fixed in (("low_freq_factor", 1.0), ("high_freq_factor", 4.0),
                             ("original_max_position_embeddings", 8192)):
            if scaling.get(field, fixed) != fixed:
                notes.append(f"rope_scaling {field} {scaling[field]}: no flag of "
                             f"Megatron-LM's (its llama3 scaling keeps {fixed})")
    elif kind == "linear":
        settings["rotary_seq_len_interpolation_factor"] = scaling["factor"]
    elif kind not in (None, "default"):
        notes.append(f"rope_scaling type {kind!r}: no flag of Megatron-LM's gives it (left out)")


def _mistral(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """MistralBridge: Llama's layout; a sliding window is --window-size (w-1, 0)."""
    _llama(config, settings, notes)
    if config.get("sliding_window") is not None:
        settings["window_size"] = _window(config["sliding_window"])


def _window(sliding_window: int) -> str:
    """HF's window (the tokens attended, itself included) as --window-size's (left, right)."""
    return f"({sliding_window - 1},0)"


def _qwen2(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Qwen2Bridge: RMSNorm, SwiGLU, no linear bias, QKV bias; Qwen's optional windows on
    the layers from ``max_window_layers`` on have no flag (named when switched on)."""
    _gated_rope(settings)
    settings["add_bias_linear"] = False
    settings["add_qkv_bias"] = True
    if config.get("use_sliding_window"):
        notes.append(f"use_sliding_window (window {config.get('sliding_window')} from layer "
                     f"{config.get('max_window_layers')} on): no flag of Megatron-LM's "
                     "windows some layers only (left out)")


def _qwen3(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Qwen3Bridge: as Qwen2 without QKV bias, with QK layernorm."""
    _qwen2(config, settings, notes)
    settings["add_qkv_bias"] = False
    settings["qk_layernorm"] = True


def _moe(settings: dict[str, Any]) -> None:
    settings["moe_grouped_gemm"] = True
    settings["moe_router_load_balancing_type"] = "aux_loss"


def _mixtral(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Mixtral: Mistral's layout with routed experts (softmax top-k), router jitter."""
    _mistral(config, settings, notes)
    _moe(settings)
    if config.get("router_jitter_noise"):
        settings["moe_input_jitter_eps"] = config["router_jitter_noise"]


def _qwen_moe(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Qwen2-MoE / Qwen3-MoE bridges: Qwen's attention, routed experts."""
    (_qwen3 if config.get("model_type") == "qwen3_moe" else _qwen2)(config, settings, notes)
    _moe(settings)
    if config.get("qkv_bias") is not None:  # transformers 5's name for Qwen2-MoE's bias
        settings["add_qkv_bias"] = bool(config["qkv_bias"])
    # Qwen3MoeBridge: renormalized top-k is a softmax after the choice (Megatron-LM's own
    # default); without it the softmax comes first
    settings["moe_router_pre_softmax"] = not config.get("norm_topk_prob", True)
    step, dense = config.get("decoder_sparse_step") or 1, set(config.get("mlp_only_layers") or ())
    layers = config.get("num_hidden_layers")
    if layers and (step != 1 or dense):
        # HF's rule: layer i is MoE when (i + 1) % step == 0 and i is no mlp_only layer
        pattern = [int((index + 1) % step == 0 and index not in dense)
                   for index in range(layers)]
        settings["moe_layer_freq"] = f"[{','.join(map(str, pattern))}]"


def _gpt2(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """GPT-2: learned absolute positions, LayerNorm, GELU, biases, tied embeddings."""
    for field, dest in (("n_layer", "num_layers"), ("n_embd", "hidden_size"),
                        ("n_head", "num_attention_heads"),
                        ("n_positions", "max_position_embeddings"),
                        ("layer_norm_epsilon", "layernorm_epsilon")):
        if field in config:
            settings[dest] = config[field]
    if config.get("n_inner"):
        settings["ffn_hidden_size"] = config["n_inner"]
    settings["position_embedding_type"] = "learned_absolute"
    for field, dest in (("attn_pdrop", "attention_dropout"), ("resid_pdrop", "hidden_dropout")):
        if config.get(field) is not None:
            settings[dest] = config[field]
    if config.get("embd_pdrop") not in (None, config.get("resid_pdrop")):
        notes.append(f"embd_pdrop {config['embd_pdrop']}: Megatron-LM's embedding dropout "
                     "is --hidden-dropout (left out)")
    activation = config.get("activation_function", "gelu_new")
    if activation in ("gelu_new", "gelu_pytorch_tanh"):
        settings["openai_gelu"] = True  # the tanh approximation
    elif activation != "gelu":
        notes.append(f"activation_function {activation!r}: no flag of Megatron-LM's "
                     "(GELU kept)")
    for field, usual in (("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
                         ("reorder_and_upcast_attn", False), ("add_cross_attention", False)):
        if config.get(field, usual) != usual:
            notes.append(f"{field} {config[field]}: no flag of Megatron-LM's (left out)")


def _deepseek(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """DeepSeekV2Bridge / DeepSeekV3Bridge: multi-latent attention, routed and shared
    experts after ``first_k_dense_replace`` dense layers, YaRN positions, V3's MTP."""
    _gated_rope(settings)
    settings["untie_embeddings_and_output_weights"] = not config.get("tie_word_embeddings",
                                                                     False)
    settings["multi_latent_attention"] = True
    settings["qk_layernorm"] = True
    for field, dest in (("q_lora_rank", "q_lora_rank"), ("kv_lora_rank", "kv_lora_rank"),
                        ("qk_nope_head_dim", "qk_head_dim"),
                        ("qk_rope_head_dim", "qk_pos_emb_head_dim"),
                        ("v_head_dim", "v_head_dim"),
                        ("n_routed_experts", "num_experts"),
                        ("n_group", "moe_router_num_groups"),
                        ("topk_group", "moe_router_group_topk"),
                        ("routed_scaling_factor", "moe_router_topk_scaling_factor"),
                        ("scoring_func", "moe_router_score_function"),
                        ("aux_loss_alpha", "moe_aux_loss_coeff")):
        if config.get(field) is not None:
            settings[dest] = config[field]
    if config.get("model_type") == "deepseek_v3":
        # V3's released configs carry no aux_loss_alpha; its bridge takes V3's 0.0001
        settings.setdefault("moe_aux_loss_coeff", 0.0001)
        settings["moe_router_enable_expert_bias"] = True  # topk_method noaux_tc
        if config.get("num_nextn_predict_layers"):
            settings["mtp_num_layers"] = config["num_nextn_predict_layers"]
    _moe(settings)
    settings["moe_router_load_balancing_type"] = "seq_aux_loss"
    settings["moe_router_pre_softmax"] = True
    _deepseek_expert_layers(config, settings, notes)
    _mla_rope(config, settings, notes)
    if config.get("rope_interleave"):
        notes.append("rope_interleave: the order of the rotary dims in DeepSeek's "
                     "checkpoint, for the weight conversion (no flag; Bridge sets none)")
    if config.get("norm_topk_prob") and settings.get("moe_router_score_function") != "sigmoid":
        notes.append("norm_topk_prob with softmax scoring: no flag of Megatron-LM's "
                     "renormalizes the top-k probabilities (left out)")


def _deepseek_expert_layers(config: Mapping[str, Any], settings: dict[str, Any],
                            notes: list[str]) -> None:
    """Which of DeepSeek's layers are MoE (all after ``first_k_dense_replace`` dense ones)
    and how wide its shared experts are together."""
    layers, dense = config.get("num_hidden_layers"), config.get("first_k_dense_replace") or 0
    if layers and config.get("moe_layer_freq", 1) == 1:
        # in the flag's own pattern syntax (a list would be spelled as separate tokens)
        settings["moe_layer_freq"] = f"([0]*{dense}+[1]*{layers - dense})"
    elif config.get("moe_layer_freq", 1) != 1:
        notes.append(f"moe_layer_freq {config['moe_layer_freq']}: DeepSeek's bridge reads "
                     "only 1 (every layer after the dense ones); left out")
    if config.get("n_shared_experts") and config.get("moe_intermediate_size"):
        settings["moe_shared_expert_intermediate_size"] = \
            config["moe_intermediate_size"] * config["n_shared_experts"]


def _mla_rope(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """YaRN under MLA: Megatron-LM's --rotary-scaling-factor, --mscale(-all-dim),
    --original-max-position-embeddings; ``beta_fast``/``beta_slow`` have no flag (the
    MLA config's own 32 and 1 stand)."""
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("type", scaling.get("rope_type"))
    if kind == "yarn":
        for field, dest in (("factor", "rotary_scaling_factor"), ("mscale", "mscale"),
                            ("mscale_all_dim", "mscale_all_dim"),
                            ("original_max_position_embeddings",
                             "original_max_position_embeddings")):
            if scaling.get(field) is not None:
                settings[dest] = scaling[field]
        for field, fixed in (("beta_fast", 32), ("beta_slow", 1)):
            if scaling.get(field, fixed) != fixed:
                notes.append(f"rope_scaling {field} {scaling[field]}: no flag of "
                             f"Megatron-LM's (its MLA config keeps {fixed})")
    else:
        # as DeepSeek's bridge does: no scaling, where the MLA config's defaults are V3's
        settings["rotary_scaling_factor"] = 1.0
        settings["mscale_all_dim"] = 1.0
        if kind not in (None, "default"):
            notes.append(f"rope_scaling type {kind!r}: no flag of Megatron-LM's gives it "
                         "under MLA (left out)")


def _gemma(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Gemma2Bridge / Gemma3ModelBridge: RMSNorm on (1 + w), tied embeddings, RoPE,
    windowed attention on all but every n-th layer; GeGLU, logit soft-capping, the
    ``query_pre_attn_scalar`` softmax scale and embedding scaling have no flag here."""
    settings.update(normalization="RMSNorm", layernorm_zero_centered_gamma=True,
                    position_embedding_type="rope", add_bias_linear=False,
                    hidden_dropout=0.0, attention_dropout=0.0)
    settings["untie_embeddings_and_output_weights"] = not config.get("tie_word_embeddings",
                                                                     True)
    gemma3 = config.get("model_type") == "gemma3_text"
    if gemma3:
        settings["qk_layernorm"] = True
        scaling = config.get("rope_scaling") or {}
        if scaling.get("rope_type", scaling.get("type")) == "linear":
            settings["rotary_seq_len_interpolation_factor"] = scaling["factor"]
        if config.get("rope_local_base_freq") not in (None, settings.get("rotary_base")):
            notes.append(f"rope_local_base_freq {config['rope_local_base_freq']}: the "
                         "windowed layers' own RoPE base has no flag of Megatron-LM's "
                         "(--rotary-base is the global layers')")
    if config.get("sliding_window"):
        settings["window_size"] = _window(config["sliding_window"])
        every = _full_attention_every(config, default=6 if gemma3 else 2)
        if every:
            settings["window_attn_skip_freq"] = every
    activation = config.get("hidden_activation") or config.get("hidden_act")
    notes.append(f"hidden_activation {activation!r} gated (GeGLU): no flag of Megatron-LM's "
                 "(--swiglu is SiLU, --quick-geglu a sigmoid approximation): the MLP is "
                 "imported ungated GELU")
    notes.append("embeddings scaled by sqrt(hidden_size): no flag of Megatron-LM's")
    if config.get("use_bidirectional_attention"):
        notes.append("use_bidirectional_attention (an embedding model's): no flag of "
                     "Megatron-LM's GPT (causal attention kept)")
    scalar = config.get("query_pre_attn_scalar")
    head_dim = config.get("head_dim")
    if scalar is not None and scalar != head_dim:
        notes.append(f"query_pre_attn_scalar {scalar} (softmax scale 1/sqrt({scalar})): "
                     f"no flag of Megatron-LM's; its scale is 1/sqrt(kv_channels={head_dim})")
    for field in ("attn_logit_softcapping", "final_logit_softcapping"):
        if config.get(field) is not None:
            notes.append(f"{field} {config[field]}: no flag of Megatron-LM's (no soft-capping)")


def _full_attention_every(config: Mapping[str, Any], default: int) -> int | None:
    """Every how many layers one attends globally (``layer_types``, else the pattern)."""
    types = config.get("layer_types")
    if isinstance(types, list) and "full_attention" in types:
        return types.index("full_attention") + 1
    return config.get("sliding_window_pattern") or config.get("_sliding_window_pattern") \
        or default


def _phi3(config: Mapping[str, Any], settings: dict[str, Any], notes: list[str]) -> None:
    """Phi-3: Llama's layout with fused qkv and gate/up weights (a checkpoint layout, no
    flag); ``resid_pdrop`` is the hidden dropout; longrope scaling has no flag."""
    _gated_rope(settings)
    if config.get("resid_pdrop") is not None:
        settings["hidden_dropout"] = config["resid_pdrop"]
    if config.get("embd_pdrop"):
        notes.append(f"embd_pdrop {config['embd_pdrop']}: Megatron-LM's embedding dropout "
                     "is --hidden-dropout (left out)")
    if config.get("sliding_window") is not None:
        settings["window_size"] = _window(config["sliding_window"])
    scaling = config.get("rope_scaling") or {}
    kind = scaling.get("rope_type", scaling.get("type"))
    if kind not in (None, "default"):
        notes.append(f"rope_scaling type {kind!r} (short/long factors): no flag of "
                     "Megatron-LM's gives it (left out)")


def _gated_rope(settings: dict[str, Any]) -> None:
    settings["normalization"] = "RMSNorm"
    settings["swiglu"] = True
    settings["position_embedding_type"] = "rope"
    settings["hidden_dropout"] = 0.0
    settings.setdefault("add_bias_linear", False)


#: model_type -> the family's settings, as its Bridge model bridge makes them.
FAMILIES: dict[str, Callable[[Mapping[str, Any], dict[str, Any], list[str]], None]] = {
    "llama": _llama, "mistral": _mistral, "qwen2": _qwen2, "qwen3": _qwen3,
    "mixtral": _mixtral, "qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe, "gpt2": _gpt2,
    "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gemma2": _gemma,
    "gemma3_text": _gemma, "phi3": _phi3,
}


class HfImported:
    """The flags, and what was read how: ``notes`` (how the file was read, what no flag
    says) and ``one_way`` (the fields neither mapped nor known to be no architecture)."""

    def __init__(self, argv: list[str], notes: list[str], unmapped: list[str]) -> None:
        self.argv = argv
        self.notes = notes
        self.one_way = {field: "no flag of Megatron-LM's; not mapped" for field in unmapped}


def read_config(path: str) -> tuple[dict[str, Any], str]:
    """The config (a file, or a model directory's ``config.json``) and how it was read."""
    from megaplug.sources._files import UntrustedInputError, parse_json, read_text_file

    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        data = parse_json(read_text_file(file, "Hugging Face config"), f"config {file}")
    except (UntrustedInputError, OSError) as exc:
        raise ValueError(str(exc)) from None
    if not isinstance(data, dict):
        raise ValueError(f"{file} holds no Hugging Face config (a JSON object)")
    try:
        import transformers
    except ImportError:
        return data, "plain JSON (transformers is not installed: absent fields are not " \
                     "filled with the family's defaults)"
    config = transformers.AutoConfig.for_model(**data)
    return {**config.to_dict(), **data}, f"transformers {transformers.__version__} " \
                                         f"({type(config).__name__})"


def settings_of(config: Mapping[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """(settings, notes, unmapped fields) of a Hugging Face config."""
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise ValueError(f"model_type {model_type!r} is no family megaplug-bridge maps "
                         f"(mapped: {', '.join(sorted(FAMILIES))})")
    settings: dict[str, Any] = {}
    notes: list[str] = []
    for field, (dest, how) in COMMON.items():
        if field in config and config[field] is not None:
            value = config[field]
            settings[dest] = (not value) if how == "negated" else value
    if "rotary_base" not in settings and isinstance(config.get("rope_parameters"), dict):
        theta = config["rope_parameters"].get("rope_theta")
        if theta is not None:
            settings["rotary_base"] = theta
    FAMILIES[str(model_type)](config, settings, notes)
    _precision(config, settings)
    heads, groups = settings.get("num_attention_heads"), settings.get("num_query_groups")
    if groups is not None and groups != heads:
        settings["group_query_attention"] = True
    else:
        settings.pop("num_query_groups", None)
    if settings.get("swiglu") and config.get("hidden_act", "silu") != "silu":
        notes.append(f"hidden_act {config['hidden_act']!r}: the family's bridge uses SwiGLU "
                     "(silu); this activation has no flag here (--swiglu kept)")
    unmapped = sorted(field for field in config
                      if field not in COMMON and field not in NOT_ARCHITECTURE
                      and model_type not in _READ_BY.get(field, ()))
    return settings, notes, unmapped


def _precision(config: Mapping[str, Any], settings: dict[str, Any]) -> None:
    dtype = config.get("torch_dtype") or config.get("dtype")
    if dtype == "bfloat16":
        settings["bf16"] = True
    elif dtype == "float16":
        settings["fp16"] = True


def import_hf(path: str, overrides: list[str], target: Any,
              environ: Mapping[str, str] | None = None) -> HfImported:
    """The ``megaplug.import`` entry point ``hf``: the architecture flags of ``path``."""
    import megaplug

    from .mlm_config import command_line

    if overrides:
        raise ValueError("a Hugging Face config takes no overrides (give flags after the "
                         "command line this prints)")
    config, how = read_config(path)
    settings, notes, unmapped = settings_of(config)
    kernel, _ = megaplug.load(target=target)
    for dest in [dest for dest in settings if dest not in kernel.table.by_dest]:
        notes.append(f"{dest} {settings.pop(dest)!r}: no flag of the target release's "
                     "(a later one has it)")
    one_way: dict[str, str] = {}
    flags, unexpressed = command_line(kernel, settings, one_way)
    argv = [token for tokens, _ in flags.values() for token in tokens]
    return HfImported(argv, [f"read as {how}", *notes, *unexpressed], unmapped)
