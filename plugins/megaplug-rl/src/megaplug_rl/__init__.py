"""megaplug plugin ``rl``: reinforcement-learning post-training (GRPO) for Megatron.

Declares the flags of Megatron's ``rl`` group and checks the combinations an RL run
(``--perform-rl-step``) cannot use: CUDA-graph persistence against KV-cache management,
inference-model weight offloading, partial rollouts and rollout granularities, sequence
packing, and the fit of rollout phases to global batches and save/exit intervals.
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, Rules


def performs_rl_step(config: Draft) -> bool:
    """The RL checks apply to RL runs only: without --perform-rl-step Megatron accepts any
    combination of these flags."""
    return bool(config.perform_rl_step)


# named, not imported: each module is imported when a resolve first runs the phase (and the
# groups under performs_rl_step, only in an RL run)
rules = Rules(derive=("megaplug_rl.derivations:DERIVATIONS",))
rules.derive("megaplug_rl.derivations:RL_STEP_DERIVATIONS", when=performs_rl_step)
rules.validate("megaplug_rl.checks:CHECKS", when=performs_rl_step)

megaplug_plugin = PluginInfo(
    name="rl",
    description="Reinforcement learning (GRPO): rollouts, KV cache and CUDA graphs across "
                "inference/training phases, weight refit.",
    options="megaplug_rl.options:RLOptions",
    version="0.1.0",
    rules=rules,
)
