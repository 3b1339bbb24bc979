"""World size, rank and the model-parallel sizes, and the data-parallel size they leave."""

from __future__ import annotations

import math

from megaplug import Draft, divisors, spoken

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

#: The model-parallel sizes a user sets; each must be a positive integer.
SIZE_FLAGS = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
              "context_parallel_size")


def sizes_are_usable(config: Draft) -> bool:
    """Whether the size arithmetic can run: a non-zero world and no zero size.

    Negative sizes (and a negative WORLD_SIZE) are usable: Megatron's validation does
    plain integer arithmetic on them (``8 % -1 == 0``, ``8 // -1 == -8``), and megaplug
    resolves them the same way.
    """
    return config.world_size != 0 and all(config[name] != 0 for name in SIZE_FLAGS)


def total_model_size(config: Draft) -> int:
    """Ranks one model-parallel group occupies: TP x PP x CP."""
    return (config.tensor_model_parallel_size * config.pipeline_model_parallel_size
            * config.context_parallel_size)


def derive_parallel_sizes(config: Draft) -> None:
    """Set the transformer pipeline size and the data-parallel size.

    Every rank outside one model-parallel group is a data-parallel rank here; a feature
    that groups data-parallel ranks further refines the size after this plugin. Megatron
    0.13's encoder stages (:func:`encoder_model_size`) add to the group.
    """
    config.set("transformer_pipeline_model_parallel_size", config.pipeline_model_parallel_size,
               inputs=("pipeline_model_parallel_size",))
    encoder = _derive_encoder_sizes(config) if ENCODER_SIZES in config else 0
    if not sizes_are_usable(config):
        return
    total = total_model_size(config) + encoder
    if encoder:
        _check_world_holds_encoder(config, total)
    if total:
        config.set("data_parallel_size", config.world_size // total,
                   inputs=("world_size", *SIZE_FLAGS, *(ENCODER_FLAGS if encoder else ())),
                   reason="world size divided by the ranks of one model-parallel group")
    if config.get("pipeline_model_parallel_split_rank") is not None:
        _split_pipeline_at_rank(config)


#: Megatron 0.13's own sizes of an encoder's stages (the last release to have them).
ENCODER_SIZES = "encoder_tensor_model_parallel_size"
ENCODER_FLAGS = (ENCODER_SIZES, "encoder_pipeline_model_parallel_size")


def _derive_encoder_sizes(config: Draft) -> int:
    """Megatron 0.13's encoder stages: their TP size and the ranks they add.

    Megatron 0.13: an encoder with stages of its own (``--encoder-pipeline-model-parallel
    -size``) takes the decoder's tensor-parallel size unless given one, which must divide
    the heads and not exceed the decoder's. Returns the ranks its stages add to one
    model-parallel group (TP x PP x CP of the encoder)."""
    tp, heads = config.tensor_model_parallel_size, config.get("num_attention_heads")
    encoder_tp = config[ENCODER_SIZES]
    encoder_pp = config.get("encoder_pipeline_model_parallel_size", 0)
    if encoder_tp > 0:
        if heads and encoder_tp and heads % encoder_tp:
            config.error(f"--num-attention-heads {heads} is not divisible by "
                         f"--encoder-tensor-model-parallel-size {encoder_tp}",
                         flags=("num_attention_heads", ENCODER_SIZES),
                         hint="choose an encoder tensor-parallel size that divides the heads")
        if encoder_tp > tp:
            config.error(f"--encoder-tensor-model-parallel-size {encoder_tp} exceeds "
                         f"--tensor-model-parallel-size {tp}: encoders with more tensor "
                         "parallelism than the decoder are not supported",
                         flags=(ENCODER_SIZES, "tensor_model_parallel_size"),
                         hint=f"use an encoder tensor-parallel size of at most {tp}")
    elif encoder_pp > 0:
        encoder_tp = tp
        config.set(ENCODER_SIZES, tp, reason="the encoder's stages take the decoder's "
                   "tensor parallelism", inputs=("encoder_pipeline_model_parallel_size",
                                                 "tensor_model_parallel_size"))
    return int(encoder_tp * encoder_pp * config.context_parallel_size)


def _check_world_holds_encoder(config: Draft, total: int) -> None:
    """Megatron 0.13: the world holds whole groups of the encoder's and decoder's ranks."""
    if config.world_size % total:
        config.error(f"world size {config.world_size} is not divisible by the model-parallel "
                     f"size {total} (the encoder's stages and the decoder's: TP x PP x CP of "
                     "each, added)", flags=("WORLD_SIZE", *SIZE_FLAGS, *ENCODER_FLAGS),
                     hint=f"launch a multiple of {total} processes")


def _split_pipeline_at_rank(config: Draft) -> None:
    """Megatron 0.13's pipeline split rank gives the encoder the first stages.

    Megatron 0.13's ``--pipeline-model-parallel-split-rank``: the first stages are the
    encoder's, the rest the decoder's (after the data-parallel size was computed)."""
    split, pp = config.pipeline_model_parallel_split_rank, config.pipeline_model_parallel_size
    inputs = ("pipeline_model_parallel_split_rank", "pipeline_model_parallel_size")
    config.set("encoder_pipeline_model_parallel_size", split,
               reason="the stages before the split rank are the encoder's", inputs=inputs)
    config.set("pipeline_model_parallel_size", pp - split,
               reason="the stages from the split rank on are the decoder's", inputs=inputs)
    if pp - split <= 0:
        config.error(f"--pipeline-model-parallel-split-rank {split} leaves the decoder no "
                     f"pipeline stage of --pipeline-model-parallel-size {pp}",
                     flags=inputs, hint=f"use a split rank below {pp}")


def check_process_identity(config: Draft) -> None:
    """WORLD_SIZE 0 is refused; a negative one, or a RANK outside [0, WORLD_SIZE), is only
    suspicious.

    Megatron divides by WORLD_SIZE's consequences when it is 0, but resolves a negative one
    with plain integer arithmetic, and reads RANK without checking it (only process-group
    set-up would fail); megaplug resolves what Megatron resolves and says what is odd.
    """
    world, rank = config.world_size, config.rank
    if world == 0:
        config.error("WORLD_SIZE is 0; a job needs at least one process",
                     flags=("WORLD_SIZE",), hint="set WORLD_SIZE to the number of processes")
    elif world < 0:
        config.warn(f"WORLD_SIZE is {world}; a job has at least one process (resolved with "
                    "Megatron's arithmetic)", flags=("WORLD_SIZE",))
    if rank < 0:
        config.warn(f"RANK is {rank}; ranks start at 0", flags=("RANK",))
    elif world >= 1 and rank >= world:
        config.warn(f"RANK {rank} is not below WORLD_SIZE {world}; check the launcher's "
                    "environment", flags=("RANK", "WORLD_SIZE"))


def check_positive_sizes(config: Draft) -> None:
    """A model-parallel size of 0 cannot work; a negative one is resolved but suspicious.

    Megatron fails on a zero size (its arithmetic divides by it) but accepts a negative
    one, so megaplug rejects the first and only warns about the second.
    """
    for name in SIZE_FLAGS:
        value = config[name]
        if value == 0:
            config.error(f"{config.spelling(name)} is 0; it must be at least 1",
                         flags=(name,), hint="use 1 to turn this kind of parallelism off")
        elif value < 0:
            config.warn(f"{config.spelling(name)} is {value}; parallel sizes are normally "
                        "at least 1", flags=(name,))


def check_world_size_divisible(config: Draft) -> None:
    """The world must hold a whole number of model-parallel groups.

    Megatron 0.13's encoder stages, or a pipeline split: checked where the sizes are
    derived."""
    if not sizes_are_usable(config) or _has_encoder_stages(config):
        return
    world, total = config.world_size, total_model_size(config)
    if world % total == 0:
        return
    parts = (f"TP {config.tensor_model_parallel_size} x PP {config.pipeline_model_parallel_size}"
             f" x CP {config.context_parallel_size}")
    config.error(
        f"world size {world} is not divisible by the model-parallel size {total} ({parts})",
        flags=("WORLD_SIZE", *SIZE_FLAGS),
        hint=f"launch a multiple of {total} processes, or choose sizes whose product divides "
             f"{world}: {spoken(divisors(world))}")


def _has_encoder_stages(config: Draft) -> bool:
    return ENCODER_SIZES in config and (
        config.get("encoder_pipeline_model_parallel_size", 0) > 0
        or config.get("pipeline_model_parallel_split_rank") is not None)


def check_hierarchical_context_parallel(config: Draft) -> None:
    """Hierarchical CP sizes multiply to the CP size; a2a+p2p needs them."""
    sizes: Optional[list[int]] = config.hierarchical_context_parallel_sizes
    cp = config.context_parallel_size
    if sizes:
        product = math.prod(sizes)
        if product != cp:
            config.error(
                f"--hierarchical-context-parallel-sizes {' '.join(map(str, sizes))} multiply to "
                f"{product}, not to the context-parallel size {cp}",
                flags=("hierarchical_context_parallel_sizes", "context_parallel_size"),
                hint=f"give sizes whose product is {cp}")
    if "a2a+p2p" in (config.cp_comm_type or []) and sizes is None:
        config.error("--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes",
                     flags=("cp_comm_type", "hierarchical_context_parallel_sizes"),
                     hint="set the a2a and p2p group sizes, e.g. "
                          "--hierarchical-context-parallel-sizes 2 4 for a context-parallel "
                          "size of 8")


def retire_model_parallel_size(config: Draft) -> None:
    """``--model-parallel-size`` is retired: reject a value and drop the setting."""
    if config.model_parallel_size is not None:
        config.error(f"--model-parallel-size {config.model_parallel_size} is no longer supported",
                     flags=("model_parallel_size",),
                     hint="use --tensor-model-parallel-size instead")
    config.discard("model_parallel_size")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (retire_model_parallel_size,)

DERIVE: tuple[Callable[[Draft], None], ...] = (derive_parallel_sizes,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_process_identity,
    check_positive_sizes,
    check_world_size_divisible,
    check_hierarchical_context_parallel,
)
