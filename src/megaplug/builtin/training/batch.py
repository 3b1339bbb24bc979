"""Batch sizes: the global batch default, evaluation batch sizes and their divisibility."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

#: Sources that count as "the user wrote --global-batch-size": Megatron's parse step records
#: ``_is_global_batch_size_explicitly_specified`` before caller defaults fill the setting.
_EXPLICIT_SOURCES = frozenset({"command-line", "config-file", "environment", "checkpoint"})


#: The model-parallel sizes whose product is one model-parallel group.
_GROUP_SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                "context_parallel_size")


def batch_parallel_size(config: Draft) -> Optional[int]:
    """Ranks that each consume their own micro batches: the world over one model-parallel
    group (Megatron's ``batch_parallel_size``).

    Every data-parallel rank is one, and so is every rank a feature groups with others to
    share a model replica's weights (which refines the data-parallel size, not this).
    ``None`` when the layout is unusable (the parallel plugin reports it).
    """
    group = 1
    for name in _GROUP_SIZES:
        group *= config.get(name, 1)
    world = config.get("world_size", 1)
    return world // group if group and world else None


def global_batch_size_was_given(config: Draft) -> bool:
    """Whether --global-batch-size came from the user, as Megatron's parse step records it.

    Megatron keeps the answer on its namespace (``_is_global_batch_size_explicitly_specified``,
    which the facade sets as well); here it is read off the value's provenance, which holds the
    same fact for every entry point and is not a setting some plugin would have to declare.
    """
    record = config.source("global_batch_size")
    while record is not None:
        if record.source in _EXPLICIT_SOURCES:
            return True
        record = record.previous
    return False


def derive_global_batch_size(config: Draft) -> None:
    """Default the global batch to one micro batch per batch-parallel rank."""
    micro = config.micro_batch_size
    if config.global_batch_size is not None or micro is None or micro <= 0:
        return
    ranks = batch_parallel_size(config)
    if not ranks:
        return  # the parallel plugin reports the impossible layout
    # a negative data-parallel size (negative WORLD_SIZE) gives a negative batch, which the
    # positivity check then refuses, as Megatron's assert does
    config.set("global_batch_size", micro * ranks,
               reason="one micro batch per batch-parallel rank",
               inputs=("micro_batch_size", "world_size", *_GROUP_SIZES))


def derive_eval_batch_sizes(config: Draft) -> None:
    """Evaluation batch sizes default to the training ones (the flags belong to logging)."""
    if "eval_global_batch_size" in config and config.eval_global_batch_size is None \
            and config.global_batch_size is not None:
        config.set("eval_global_batch_size", config.global_batch_size,
                   reason="defaults to the training global batch size",
                   inputs=("global_batch_size",))
    if "eval_micro_batch_size" in config and config.eval_micro_batch_size is None \
            and config.micro_batch_size is not None:
        config.set("eval_micro_batch_size", config.micro_batch_size,
                   reason="defaults to the training micro batch size",
                   inputs=("micro_batch_size",))


def check_micro_batch_size(config: Draft) -> None:
    """A positive micro batch size is required."""
    micro = config.micro_batch_size
    if micro is None:
        config.error("--micro-batch-size is required", flags=("micro_batch_size",),
                     hint="set --micro-batch-size to the samples each GPU processes per step")
    elif micro <= 0:
        config.error(f"--micro-batch-size {micro} must be positive", flags=("micro_batch_size",),
                     hint="use a micro batch size of 1 or more")


def check_global_batch_size(config: Draft) -> None:
    """The global batch size, given or derived, must be positive."""
    size = config.global_batch_size
    if size is None or size > 0:
        return
    if config.given("global_batch_size"):
        config.error(f"--global-batch-size {size} must be positive",
                     flags=("global_batch_size",),
                     hint="use a positive global batch size, or leave it out to default to "
                          "micro batch size times data-parallel size")
    else:
        config.error(f"the global batch size defaults to micro batch size x data-parallel "
                     f"size = {size}, which is not positive",
                     flags=("micro_batch_size", "data_parallel_size", "WORLD_SIZE"),
                     hint="check WORLD_SIZE and the parallel sizes, or give --global-batch-size")


def check_step_schedule_excludes_global_batch(config: Draft) -> None:
    """A step schedule sets the global batch size itself."""
    if config.step_batch_size_schedule is not None and global_batch_size_was_given(config):
        config.error("--step-batch-size-schedule and --global-batch-size cannot be used together",
                     flags=("step_batch_size_schedule", "global_batch_size"),
                     hint="the schedule sets the global batch size; drop --global-batch-size")


#: The first Megatron release line that checks the (evaluation) batch sizes' divisibility
#: in its validation; older lines leave it to the micro-batch calculator at start-up.
EVAL_BATCH_RELEASE = "0.18.0"


def check_eval_batch_divisibility(config: Draft) -> None:
    """Evaluation steps split into whole micro batches on every batch-parallel rank.

    Each evaluation step must split into whole micro batches on every batch-parallel rank
    (checked from Megatron 0.18 on)."""
    if config.env.megatron.before(EVAL_BATCH_RELEASE):
        return
    eval_global = _first_set(config.get("eval_global_batch_size"), config.global_batch_size)
    eval_micro = _first_set(config.get("eval_micro_batch_size"), config.micro_batch_size)
    ranks = batch_parallel_size(config)
    if eval_global is None or eval_micro is None or not ranks:
        return
    if config.micro_batch_size is None or config.micro_batch_size <= 0 \
            or config.global_batch_size is None or config.global_batch_size <= 0:
        return  # Megatron stops at the training batch sizes, reported above
    # name the flags the user wrote: evaluation sizes not given are the training ones
    names = (_given_or("eval_global_batch_size", "--global-batch-size", config),
             _given_or("eval_micro_batch_size", "--micro-batch-size", config))
    step = eval_micro * ranks
    if step == 0:
        config.error(f"{names[1]} is 0; evaluation needs at least one sample per micro batch",
                     flags=(names[1],), hint=f"use {names[1]} 1 or more")
        return
    # Python's modulo, as Megatron's assert computes it (negative sizes may pass)
    if eval_global % step == 0:
        return
    config.error(
        f"{names[0]} {eval_global} must be divisible by {names[1]} {eval_micro} x batch-parallel "
        f"size {ranks}{_data_parallel_factors(config, ranks)} = {step}"
        + ("" if all(name.startswith("--eval") for name in names)
           else " (evaluation batch sizes default to the training ones)"),
        flags=(*names, "data_parallel_size"),
        hint=_divisibility_hint(eval_global, eval_micro, ranks, names),
    )


def _data_parallel_factors(config: Draft, ranks: int) -> str:
    """Name the factors of a batch-parallel size above the data-parallel size.

    `` (data_parallel_size D x NAME F)`` when ranks sharing a replica's weights make the
    batch-parallel size more than the data-parallel size, else empty.

    The factors are the settings the data-parallel size was divided by (its provenance), so
    the message names a feature's setting (GTP's ``gtp_weight_remat_size``, as Megatron's
    does) without this plugin knowing the feature.
    """
    data_parallel = config.get("data_parallel_size")
    if not data_parallel or data_parallel == ranks:
        return ""
    record = config.source("data_parallel_size")
    divisors = [name for name in (record.inputs if record is not None else ())
                if name != "data_parallel_size" and name in config]
    if not divisors:
        return ""
    factors = [f"data_parallel_size {data_parallel}",
               *(f"{name} {config.get(name)}" for name in divisors)]
    return f" ({' x '.join(factors)})"


def _given_or(dest: str, fallback: str, config: Draft) -> str:
    """The flag of ``dest`` when the user gave it, else the flag its value defaults from."""
    return config.spelling(dest) if config.given(dest) else fallback


def _first_set(value: Optional[int], fallback: Optional[int]) -> Optional[int]:
    """``value`` unless it is unset (None); 0 counts as set, as in Megatron."""
    return fallback if value is None else value


def _divisibility_hint(total: int, micro: int, ranks: int, names: tuple[str, ...]) -> str:
    step = abs(micro * ranks)
    lower = (total // step) * step
    suggestions = [str(v) for v in (lower, lower + step) if v > 0] or [str(step)]
    text = f"use a batch size that is a multiple of {step} (such as {' or '.join(suggestions)})"
    # the largest smaller micro batch that fits, searched no further than a bound: a
    # mistyped huge micro batch size must not make the hint take as long
    fitting = [m for m in range(max(1, micro - 100_000), micro) if total % (m * ranks) == 0]
    if fitting:
        text += f", or {names[1]} {fitting[-1]}"
    return text


DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_global_batch_size,
    derive_eval_batch_sizes,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_micro_batch_size,
    check_step_schedule_excludes_global_batch,
    check_global_batch_size,
    check_eval_batch_divisibility,
)
