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


#: The lines whose RL run resolves parallel generations from --rl-num-parallel-generations,
#: --rl-num-parallel-generation-batches or the deprecated --rl-parallel-generation-tasks.
PARALLEL_GENERATION_RELEASES = ("0.17.0", "0.18.2")


def resolve_parallel_generations(config: Draft) -> None:
    """An RL run's parallel generations (Megatron 0.17 and 0.18).

    Megatron 0.17 and 0.18: an RL run's parallel generation tasks and generation batch
    size, and whether generations keep their order (``rl_enforce_generation_order``)."""
    if not config.perform_rl_step \
            or not config.env.megatron.between(*PARALLEL_GENERATION_RELEASES):
        config.discard("rl_enforce_generation_order", reason="only 0.17 and 0.18 RL runs")
        return
    _take_deprecated_tasks(config)
    generations = config.rl_num_parallel_generations
    batches = config.rl_num_parallel_generation_batches
    if generations is not None and batches is not None:
        config.error("--rl-num-parallel-generations and --rl-num-parallel-generation-batches "
                     "cannot be used together",
                     flags=("rl_num_parallel_generations", "rl_num_parallel_generation_batches"),
                     hint="keep one of them")
        return
    if generations is not None or batches is not None:
        _needs_partial_rollouts(config, "rl_num_parallel_generations" if batches is None
                                else "rl_num_parallel_generation_batches")
    batch, tasks = _generation_batch_and_tasks(config, generations, batches)
    inputs = ("rl_num_parallel_generations", "rl_num_parallel_generation_batches",
              "rl_generation_batch_size")
    config.set("rl_generation_batch_size", batch, reason="the generation batch", inputs=inputs)
    config.set("rl_parallel_generation_tasks", tasks, reason="parallel generation tasks",
               inputs=inputs)
    config.set("rl_enforce_generation_order", batch > 1,
               reason="generation batches above 1 keep their order",
               inputs=("rl_generation_batch_size",))


def _generation_batch_and_tasks(config: Draft, generations: int | None,
                                batches: int | None) -> tuple[int, int]:
    """The generation batch size and the parallel generation tasks, as 0.17 and 0.18 pick
    them from whichever of the two counts is given (512 tasks when neither is)."""
    batch, group = config.rl_generation_batch_size, config.grpo_group_size
    if generations is not None:
        if group and generations % group:
            config.error(f"--rl-num-parallel-generations {generations} must be divisible by "
                         f"--grpo-group-size {group}",
                         flags=("rl_num_parallel_generations", "grpo_group_size"),
                         hint=f"use a multiple of {group}")
        return batch or 1, generations // group if group else generations
    if batches is not None:
        batch = batch if batch is not None else config.grpo_prompts_per_step
        return batch, batches * batch
    return (batch if batch is not None else 1), 512


def _take_deprecated_tasks(config: Draft) -> None:
    """--rl-parallel-generation-tasks (deprecated) as --rl-num-parallel-generations."""
    tasks = config.rl_parallel_generation_tasks
    if tasks is None:
        return
    if config.rl_num_parallel_generations is not None:
        config.error("--rl-num-parallel-generations and --rl-parallel-generation-tasks cannot "
                     "be used together", flags=("rl_num_parallel_generations",
                                                "rl_parallel_generation_tasks"),
                     hint="use --rl-num-parallel-generations (the other is deprecated)")
        return
    config.warn("--rl-parallel-generation-tasks is deprecated; use "
                "--rl-num-parallel-generations", flags=("rl_parallel_generation_tasks",))
    config.set("rl_num_parallel_generations", tasks * config.grpo_group_size,
               reason="tasks x rollouts per prompt",
               inputs=("rl_parallel_generation_tasks", "grpo_group_size"))


def _needs_partial_rollouts(config: Draft, flag: str) -> None:
    """Parallel generations are asked for only with partial rollouts."""
    if not config.rl_partial_rollouts:
        config.error(f"{config.spelling(flag)} needs --rl-partial-rollouts",
                     flags=(flag, "rl_partial_rollouts"), hint="add --rl-partial-rollouts")


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (
    start_packed_bin_counter,
    count_samples_per_step,
    resolve_parallel_generations,
)
#: Derivations of an RL run only.
RL_STEP_DERIVATIONS: tuple[Callable[[Draft], None], ...] = (resolve_generation_lag,)
