"""megaplug plugin ``rl``: reinforcement-learning post-training (GRPO) for Megatron.

Declares the flags of Megatron's ``rl`` group and checks the combinations an RL run
(``--perform-rl-step``) cannot use: CUDA-graph persistence against KV-cache management,
inference-model weight offloading, partial rollouts and rollout granularities, sequence
packing, and the fit of rollout phases to global batches and save/exit intervals.
"""

from __future__ import annotations

from megaplug import Draft, FlagDeclarations, PluginInfo, Rules, hookimpl

from .checks import CHECKS, requests_per_batch

__all__ = ["RLOptions", "megaplug_plugin"]

rules = Rules()


@rules.derive
def start_packed_bin_counter(config: Draft) -> None:
    """Start the packed-bin counter when rollouts are packed; otherwise drop it."""
    if config.rl_use_sequence_packing:
        config.set("consumed_train_bins", 0, reason="packed-bin counter starts at zero",
                   inputs=("rl_use_sequence_packing",))
    else:
        config.discard("consumed_train_bins", reason="only sequence packing counts bins")


@rules.derive
def count_samples_per_step(config: Draft) -> None:
    """Count the rollouts one GRPO step generates (Megatron's training loop reads it).

    Like Megatron's validate_args, only an RL run has the setting."""
    if config.perform_rl_step:
        config.set("grpo_samples_per_iteration",
                   config.grpo_prompts_per_step * config.grpo_group_size,
                   reason="prompts per step x rollouts per prompt",
                   inputs=("grpo_prompts_per_step", "grpo_group_size"))
    else:
        config.discard("grpo_samples_per_iteration", reason="only an RL run samples rollouts")


def performs_rl_step(config: Draft) -> bool:
    """The RL checks apply to RL runs only: without --perform-rl-step Megatron accepts any
    combination of these flags."""
    return bool(config.perform_rl_step)


@rules.derive(when=performs_rl_step)
def resolve_generation_lag(config: Draft) -> None:
    """Set the generation lag (in trainer batches) from the in-flight requests, or to 0.

    From --rl-max-inflight-requests when given ((requests / requests per batch) - 1, a
    float as in Megatron-LM main), else 0 -- synchronous
    generation -- without partial rollouts; with them an unset lag stays None (tuned to the
    inference engine's capacity at launch)."""
    inflight, lag = config.rl_max_inflight_requests, config.rl_generation_lag
    if inflight is not None:
        per_batch = requests_per_batch(config)
        if lag is None and inflight >= 1 and per_batch > 0:
            config.set("rl_generation_lag", inflight / per_batch - 1,
                       reason="(in-flight requests / requests per trainer batch) - 1",
                       inputs=("rl_max_inflight_requests", "grpo_prompts_per_step",
                               "grpo_group_size"))
    elif lag is None and not config.rl_partial_rollouts:
        config.set("rl_generation_lag", 0,
                   reason="generation is synchronous without partial rollouts",
                   inputs=("rl_partial_rollouts",))


rules.validate(*CHECKS, when=performs_rl_step)

megaplug_plugin = PluginInfo(
    name="rl",
    description="Reinforcement learning (GRPO): rollouts, KV cache and CUDA graphs across "
                "inference/training phases, weight refit.",
    version="0.1.0",
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the RL flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import RLOptions

    flags.add_options(RLOptions)


def __getattr__(name: str) -> object:
    if name == "RLOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
