"""megaplug plugin ``rl``: reinforcement-learning post-training (GRPO) for Megatron.

Declares the flags of Megatron's ``rl`` group and checks the combinations an RL run
(``--perform-rl-step``) cannot use: CUDA-graph persistence against KV-cache management,
inference-model weight offloading, partial rollouts and rollout granularities, sequence
packing, and the fit of rollout phases to global batches and save/exit intervals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from .checks import CHECKS
from .options import RLOptions

if TYPE_CHECKING:  # the kernel does not export this type; needed for annotations only
    from megaplug._registry import FlagDeclarations

__all__ = ["RLOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="rl",
    description="Reinforcement learning (GRPO): rollouts, KV cache and CUDA graphs across "
                "inference/training phases, weight refit.",
    version="0.1.0",
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the RL flags."""
    flags.add_options(RLOptions)


@hookimpl
def derive(config: Draft) -> None:
    """Start the packed-bin counter when rollouts are packed; otherwise drop it."""
    if config.rl_use_sequence_packing:
        config.set("consumed_train_bins", 0, reason="packed-bin counter starts at zero",
                   inputs=("rl_use_sequence_packing",))
    else:
        config.discard("consumed_train_bins", reason="only sequence packing counts bins")


@hookimpl
def validate(config: Draft) -> None:
    """Run every RL check; they apply only to runs with --perform-rl-step."""
    if not config.perform_rl_step:
        return
    for check in CHECKS:
        check(config)
