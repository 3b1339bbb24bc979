"""MoE normalizations and derivations: each a small function that sets one thing and says why."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


# -- normalize ---------------------------------------------------------------------------


def zero_experts_means_dense(config: Draft) -> None:
    """``--num-experts 0`` is a dense model: store it as ``None`` like an unset flag."""
    if config.num_experts == 0:
        config.set("num_experts", None, reason="0 experts means a dense model",
                   inputs=("num_experts",))


def unwrap_single_router_lists(config: Draft) -> None:
    """A one-element router list is stored as its only value, as Megatron does."""
    for dest in ("moe_router_load_balancing_type", "moe_aux_loss_coeff"):
        value = config[dest]
        if isinstance(value, list) and len(value) == 1:
            config.set(dest, value[0], reason="a single value is stored unwrapped",
                       inputs=(dest,))


NORMALIZATIONS: tuple[Callable[[Draft], None], ...] = (
    zero_experts_means_dense,
    unwrap_single_router_lists,
)


# -- derive ------------------------------------------------------------------------------


def default_expert_tensor_parallel_size(config: Draft) -> None:
    """Experts use the dense tensor-parallel degree unless told otherwise."""
    if config.expert_tensor_parallel_size is None:
        config.set("expert_tensor_parallel_size", config.get("tensor_model_parallel_size", 1),
                   reason="defaults to --tensor-model-parallel-size",
                   inputs=("tensor_model_parallel_size",))


def default_moe_ffn_hidden_size(config: Draft) -> None:
    """Experts use the dense FFN hidden size unless ``--moe-ffn-hidden-size`` is given."""
    if config.num_experts is None or config.moe_ffn_hidden_size is not None:
        return
    ffn_hidden_size = config.get("ffn_hidden_size")
    if ffn_hidden_size is None:
        return
    config.set("moe_ffn_hidden_size", ffn_hidden_size,
               reason="defaults to --ffn-hidden-size", inputs=("ffn_hidden_size",))
    config.warn(f"--moe-ffn-hidden-size is not set; experts use --ffn-hidden-size "
                f"({ffn_hidden_size})", flags=("moe_ffn_hidden_size", "ffn_hidden_size"))


def upcycling_skips_optimizer_and_rng(config: Draft) -> None:
    """Upcycling starts from a dense checkpoint, whose optimizer and RNG states do not fit."""
    if not config.moe_use_upcycling:
        return
    for dest in ("no_load_optim", "no_load_rng"):
        if dest in config and not config[dest]:
            config.set(dest, True, reason="required by --moe-use-upcycling",
                       inputs=("moe_use_upcycling",))
            config.warn(f"--moe-use-upcycling turns on {config.spelling(dest)}",
                        flags=(dest, "moe_use_upcycling"))


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (
    default_expert_tensor_parallel_size,
    default_moe_ffn_hidden_size,
    upcycling_skips_optimizer_and_rng,
)
