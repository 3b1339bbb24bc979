"""Heterogeneous layer configs: a HuggingFace Llama-Nemotron ``config.json`` per-layer spec.

Such a config fixes the model's shape and its architecture choices (SiLU-gated MLP,
RMSNorm, group-query attention, scaled RoPE). The command line must agree with it; this
module reads the config (from ``--heterogeneous-layers-config-path`` unless the encoded
JSON is already given) and reports every flag that differs.
"""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

PATH = "heterogeneous_layers_config_path"
ENCODED = "heterogeneous_layers_config_encoded_json"


def load_heterogeneous_config(config: Draft) -> None:
    """Keep the config's JSON text in ``--heterogeneous-layers-config-encoded-json``.

    Checkpoints store the encoded text, so a file given by path is read into it.
    """
    path = config[PATH]
    if config[ENCODED] is not None or path is None:
        return
    from megaplug.sources._files import UntrustedInputError, read_text_file

    try:
        text = read_text_file(path, "heterogeneous layers config")
    except UntrustedInputError as exc:
        config.error(f"--heterogeneous-layers-config-path {path}: cannot read the file "
                     f"({exc})", flags=(PATH,),
                     hint="give the path of an existing JSON file")
        return
    config.set(ENCODED, text, reason=f"read from {path}", inputs=(PATH,))


def check_against_heterogeneous_config(config: Draft) -> None:
    """Every architecture flag must match what the heterogeneous config implies."""
    text = config[ENCODED]
    if text is None:
        return
    expected = _expected_flags(config, text)
    if expected is None:
        return
    differences = {dest: (config.get(dest), value) for dest, value in expected.items()
                   if config.get(dest) != value}
    if not differences:
        return
    listed = ", ".join(f"{config.spelling(dest)} is {given!r} but the config needs {wanted!r}"
                       for dest, (given, wanted) in differences.items())
    config.error(f"the heterogeneous layers config disagrees with the command line: {listed}",
                 flags=(*differences, ENCODED if config[PATH] is None else PATH),
                 hint="set these flags to the values the heterogeneous config implies")


def _expected_flags(config: Draft, text: str) -> dict[str, Any] | None:
    """The flag values the config implies, or None after reporting why it is unusable."""
    where = config.spelling(PATH if config[PATH] is not None else ENCODED)
    from megaplug.sources._files import UntrustedInputError, parse_json

    try:
        hf = parse_json(text, "the heterogeneous layers config")
        if not isinstance(hf, dict):
            raise UntrustedInputError("the top level is not an object")
    except UntrustedInputError as exc:
        config.error(f"{where}: not valid JSON ({exc})", flags=(where,),
                     hint="give a HuggingFace-style config.json object")
        return None
    try:
        return _implied_flags(config, hf, where)
    except (KeyError, TypeError, IndexError, ZeroDivisionError) as exc:
        config.error(f"{where}: the heterogeneous config lacks a usable entry "
                     f"({type(exc).__name__}: {exc})", flags=(where,),
                     hint="the config needs hidden_act, block_configs, num_hidden_layers, "
                          "hidden_size, num_attention_heads, tie_word_embeddings, "
                          "rope_theta and rope_scaling.factor")
        return None


def _implied_flags(config: Draft, hf: dict[str, Any], where: str) -> dict[str, Any] | None:
    if hf["hidden_act"] != "silu":
        config.error(f"{where}: hidden_act is {hf['hidden_act']!r}; heterogeneous models "
                     "must use 'silu'", flags=(where,),
                     hint="use a config whose hidden_act is silu")
        return None
    groups = [block["attention"]["n_heads_in_group"] for block in hf["block_configs"]
              if block["attention"]["n_heads_in_group"] is not None]
    if any(size != groups[0] for size in groups):
        config.error(f"{where}: n_heads_in_group differs between layers ({sorted(set(groups))}); "
                     "every attention layer must use the same number", flags=(where,),
                     hint="use one n_heads_in_group for all attention layers")
        return None
    return {
        "swiglu": True,
        "normalization": "RMSNorm",
        "group_query_attention": True,
        "position_embedding_type": "rope",
        "rotary_percent": 1.0,
        "use_rope_scaling": True,
        "use_rotary_position_embeddings": True,
        "num_layers": hf["num_hidden_layers"],
        "hidden_size": hf["hidden_size"],
        "num_attention_heads": hf["num_attention_heads"],
        "untie_embeddings_and_output_weights": not hf["tie_word_embeddings"],
        "rotary_base": hf["rope_theta"],
        "rope_scaling_factor": hf["rope_scaling"]["factor"],
        "num_query_groups": hf["num_attention_heads"] // groups[0],
    }


# the config is read, then compared with the flags as given, before anything derives them
NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    load_heterogeneous_config,
    check_against_heterogeneous_config,
)
