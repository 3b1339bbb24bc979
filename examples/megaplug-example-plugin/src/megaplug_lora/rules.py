"""The LoRA plugin's rules, one small named function each, and the tables that declare them.

``__init__`` names these tables (``"megaplug_lora.rules:VALIDATE"``) instead of importing
them, so this module is imported only once a resolve runs a phase: listing, documenting or
completing the plugin's flags never does.
"""

from __future__ import annotations

from typing import Callable

from megaplug import Draft

# -- normalize -------------------------------------------------------------------------


def migrate_lora_r(config: Draft) -> None:
    """``--lora-r N`` is the old spelling of ``--lora-rank N``; the old key leaves the result."""
    old = config.lora_r
    if old is not None:
        if config.given("lora_rank") and config.lora_rank != old:
            config.error(
                f"--lora-r {old} and --lora-rank {config.lora_rank} disagree",
                flags=("lora_r", "lora_rank"),
                hint="drop --lora-r, the deprecated spelling of --lora-rank")
        else:
            config.set("lora_rank", old, inputs=("lora_r",),
                       reason="--lora-r is the deprecated spelling of --lora-rank")
            config.warn(f"--lora-r is deprecated; use --lora-rank {old}", flags=("lora_r",))
    config.discard("lora_r", reason="retired spelling of lora_rank")


# -- derive ----------------------------------------------------------------------------


def derive_scaling(config: Draft) -> None:
    """lora_scaling = lora_alpha / lora_rank (validate reports a rank that is not positive)."""
    rank = config.lora_rank
    if rank is not None and rank > 0:
        config.set("lora_scaling", config.lora_alpha / rank,
                   inputs=("lora_alpha", "lora_rank"))


# -- validate --------------------------------------------------------------------------


def check_rank_positive(config: Draft) -> None:
    rank = config.lora_rank
    if rank is not None and rank <= 0:
        config.error(f"--lora-rank {rank} must be a positive integer", flags=("lora_rank",),
                     hint="use a small rank such as 8, or drop --lora-rank to train without "
                          "adapters")


def check_rank_below_hidden(config: Draft) -> None:
    """An adapter of rank >= hidden size is no cheaper than training the layer itself."""
    rank, hidden = config.lora_rank, config.get("hidden_size")
    if rank is not None and rank > 0 and hidden is not None and rank >= hidden:
        config.error(f"--lora-rank {rank} is not smaller than --hidden-size {hidden}",
                     flags=("lora_rank", "hidden_size"),
                     hint=f"use a rank below {hidden}; LoRA saves memory only when the rank is "
                          "much smaller than the hidden size")


def check_dropout(config: Draft) -> None:
    dropout = config.lora_dropout
    if not 0.0 <= dropout < 1.0:
        config.error(f"--lora-dropout {dropout} is outside [0, 1)", flags=("lora_dropout",),
                     hint="use a probability such as 0.05, or 0 for none")


def check_alpha(config: Draft) -> None:
    if config.lora_alpha <= 0:
        config.error(f"--lora-alpha {config.lora_alpha} must be positive",
                     flags=("lora_alpha",), hint="a common choice is twice the rank")


def check_settings_without_rank(config: Draft) -> None:
    """Adapter settings without a rank do nothing; say so rather than ignore them silently."""
    if config.lora_rank is not None:
        return
    unused = [d for d in ("lora_alpha", "lora_dropout", "lora_target_modules") if config.given(d)]
    if unused:
        spelled = ", ".join(config.spelling(d) for d in unused)
        config.warn(f"{spelled} {'has' if len(unused) == 1 else 'have'} no effect without "
                    "--lora-rank", flags=tuple(unused))


#: The rules of each phase, in the order the kernel runs them.
NORMALIZE: tuple[Callable[[Draft], None], ...] = (migrate_lora_r,)
DERIVE: tuple[Callable[[Draft], None], ...] = (derive_scaling,)
VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_rank_positive,
    check_rank_below_hidden,
    check_dropout,
    check_alpha,
    check_settings_without_rank,
)
