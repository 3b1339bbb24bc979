"""The RL derivations: counters and sample counts every run gets, and the generation lag of
an RL run (``--perform-rl-step``)."""

from __future__ import annotations


from megaplug import Draft

from .checks import requests_per_batch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def start_packed_bin_counter(config: Draft) -> None:
    """Start the packed-bin counter when rollouts are packed; otherwise drop it."""
    if config.rl_use_sequence_packing:
        config.set("consumed_train_bins", 0, reason="packed-bin counter starts at zero",
                   inputs=("rl_use_sequence_packing",))
    else:
        config.discard("consumed_train_bins", reason="only sequence packing counts bins")


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


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (
    start_packed_bin_counter,
    count_samples_per_step,
)
#: Derivations of an RL run only.
RL_STEP_DERIVATIONS: tuple[Callable[[Draft], None], ...] = (resolve_generation_lag,)
