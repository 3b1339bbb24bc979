"""Divisibility that Megatron's model configuration does not check but its layers need.

These fail later still -- while the layers are built or run -- and Megatron's own
configuration accepts them, so pre-flight warns rather than rejects: the launch resolves,
and the warning says what will break.
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import AT_MODEL_BUILD, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check


def _warn(config: Draft, message: str, flags: tuple[str, ...]) -> None:
    config.warn(f"{message}; {AT_MODEL_BUILD.replace('would raise this', 'would fail')}",
                flags=flags)


def heads_group_into_query_groups(config: Draft) -> None:
    """Each query group serves a whole number of attention heads."""
    heads, groups = config.get("num_attention_heads"), view.query_groups(config)
    if config.get("group_query_attention") and heads and groups and heads % groups:
        _warn(config, f"{shown(config, 'num_attention_heads')} is not a multiple of "
                      f"{shown(config, 'num_query_groups', groups)}",
              ("num_attention_heads", "num_query_groups"))


def mlp_width_divides_over_tensor_parallel_ranks(config: Draft) -> None:
    """Column-parallel MLP weights are split evenly over the (expert) tensor-parallel ranks."""
    pairs = (("ffn_hidden_size", "tensor_model_parallel_size"),
             ("moe_ffn_hidden_size", "expert_tensor_parallel_size"))
    for width_dest, ranks_dest in pairs:
        width, ranks = config.get(width_dest), config.get(ranks_dest)
        if width_dest == "moe_ffn_hidden_size" and view.experts(config) is None:
            continue
        if width and ranks and ranks > 1 and width % ranks:
            _warn(config, f"{shown(config, width_dest, width)} cannot be split over "
                          f"{shown(config, ranks_dest, ranks)}",
                  (width_dest, ranks_dest))


CHECKS: tuple[Check, ...] = (
    heads_group_into_query_groups,
    mlp_width_divides_over_tensor_parallel_ranks,
)
