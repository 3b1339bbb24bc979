"""Sequence lengths: --seq-length / --encoder-seq-length and the context-parallel multiple."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def fill_seq_length(config: Draft) -> None:
    """--seq-length and --encoder-seq-length are one setting; fill whichever is missing.

    Runs in normalize so every plugin's derive hook sees the filled-in length.
    """
    seq, encoder = config.seq_length, config.encoder_seq_length
    if seq is not None:
        if encoder is not None:
            config.error("--seq-length and --encoder-seq-length cannot both be given",
                         flags=("seq_length", "encoder_seq_length"),
                         hint="give the sequence length once, with --seq-length")
            return
        config.set("encoder_seq_length", seq, reason="same as --seq-length",
                   inputs=("seq_length",))
    elif encoder is not None:
        config.set("seq_length", encoder, reason="same as --encoder-seq-length",
                   inputs=("encoder_seq_length",))
    else:
        config.error("the sequence length is not set", flags=("seq_length",),
                     hint="pass --seq-length (or --encoder-seq-length)")


def _seq_length_given_directly(config: Draft) -> bool:
    """True unless seq_length was copied from --encoder-seq-length.

    Megatron checks the context-parallel multiple before that copy, so a length given only
    as --encoder-seq-length escapes the check there; we keep that behaviour.
    """
    record = config.source("seq_length")
    return record is None or record.source != "normalized"


def check_context_parallel_multiple(config: Draft) -> None:
    """With context parallelism each rank holds two chunks of the sequence."""
    seq, cp = config.seq_length, config.get("context_parallel_size", 1) or 1
    if seq is None or cp <= 1 or not _seq_length_given_directly(config):
        return
    if seq % (2 * cp):
        config.error(f"--seq-length {seq} is not a multiple of 2 x the context-parallel "
                     f"size {cp} (= {2 * cp})", flags=("seq_length", "context_parallel_size"),
                     hint=f"use a sequence length divisible by {2 * cp}")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (fill_seq_length,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (check_context_parallel_multiple,)
