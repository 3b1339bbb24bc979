"""The helpers of Megatron's ``arguments.py`` that other Megatron code imports: the
argparse ``type=`` functions for layer patterns, and the heterogeneous-config check.

Megatron evaluates pattern strings with ``eval`` after a character filter; these parse the
same grammar (digits, ``[ ]``, ``( )``, ``,``, ``+``, ``*``) with megaplug's one layer-pattern
parser (``values._patterns``, shared with the built-ins and plugins), so a hostile pattern
cannot run code or exhaust memory.
"""

from __future__ import annotations

import argparse

from ..values._patterns import int_tuple, layer_frequency, layer_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def moe_freq_type(x: Any) -> Any:
    """MoE layer frequency: ``N`` (one expert layer in every N) or a per-layer list
    expression such as ``"([1]*3+[0])*2"`` (1 = expert layer)."""
    return layer_frequency(x)


def no_rope_freq_type(x: Any) -> Any:
    """Layers that skip RoPE: ``N`` (every N-th layer) or a per-layer list expression
    (1 = RoPE skipped); None stays None."""
    return None if x is None else layer_frequency(x)


def la_freq_type(x: Any) -> Any:
    """Linear-attention frequency: ``N`` ((N-1) linear-attention layers per SDPA layer) or a
    per-layer list expression (1 = linear attention); None stays None."""
    return None if x is None else layer_frequency(x)


def compress_ratios_type(x: Any) -> Any:
    """Per-layer compression ratios for compressed sparse attention: a list expression."""
    return layer_pattern(x)


def tuple_type(x: Any) -> Any:
    """``"1,2,3"`` or ``"(1,2,3)"`` -> ``(1, 2, 3)``; a tuple or None stays as it is."""
    return None if x is None else int_tuple(x)


def validate_model_config_args_from_heterogeneous_config(args: argparse.Namespace) -> None:
    """Check ``args`` against a HuggingFace Llama-Nemotron heterogeneous layer config.

    The config comes from ``args.heterogeneous_layers_config_encoded_json`` or, when that
    is None, from the file at ``args.heterogeneous_layers_config_path`` (whose text is then
    kept in the encoded field, as Megatron does). Raises ``ValueError`` naming every
    argument that differs from what the config implies.
    """
    path = getattr(args, "heterogeneous_layers_config_path", None)
    encoded = getattr(args, "heterogeneous_layers_config_encoded_json", None)
    if path is None and encoded is None:
        return
    from ..sources._files import parse_json, read_text_file  # their errors are ValueErrors

    if encoded is None:
        encoded = args.heterogeneous_layers_config_encoded_json = read_text_file(
            path, "heterogeneous layers config")
    config = parse_json(encoded, "the heterogeneous layers config")
    if config["hidden_act"] != "silu":
        raise ValueError(f"hidden_act in heterogeneous config is {config['hidden_act']}, "
                         "should be silu")
    groups = [block["attention"]["n_heads_in_group"] for block in config["block_configs"]
              if block["attention"]["n_heads_in_group"] is not None]
    if any(size != groups[0] for size in groups):
        raise ValueError("num query head must be consistent across all layers")
    implied = {
        "swiglu": True, "normalization": "RMSNorm", "group_query_attention": True,
        "position_embedding_type": "rope", "rotary_percent": 1.0, "use_rope_scaling": True,
        "use_rotary_position_embeddings": True,
        "num_layers": config["num_hidden_layers"], "hidden_size": config["hidden_size"],
        "num_attention_heads": config["num_attention_heads"],
        "untie_embeddings_and_output_weights": not config["tie_word_embeddings"],
        "rotary_base": config["rope_theta"],
        "rope_scaling_factor": config["rope_scaling"]["factor"],
        "num_query_groups": config["num_attention_heads"] // groups[0],
    }
    differing = [f"{key}: {getattr(args, key, None)} (provided) != {value} (expected)"
                 for key, value in implied.items() if getattr(args, key, None) != value]
    if differing:
        raise ValueError(f"Arguments differ from heterogeneous config: {', '.join(differing)}")
