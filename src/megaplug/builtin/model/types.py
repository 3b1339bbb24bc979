"""Value types of the model flags: the attention backend enum and the pattern parsers.

Megatron evaluates layer-pattern strings with ``eval`` after a character check; here the
same check guards :func:`megaplug.parse_pattern`, which never evaluates code (the parsers
megaplug's built-ins, plugins and facade share: ``megaplug.values._patterns``).
"""

from __future__ import annotations

import enum

from megaplug.values._patterns import int_tuple, layer_frequency, layer_pattern

#: An integer ratio (``4``) or an explicit per-layer list (``[1, 1, 1, 0]``).
LayerPattern = int | list


class AttnBackend(enum.Enum):
    """Attention implementation; member names are what ``--attention-backend`` accepts."""

    __megatron_type__ = "megatron.core.transformer.enums:AttnBackend"

    flash = 1
    fused = 2
    unfused = 3
    local = 4
    auto = 5


def moe_freq_type(text: str) -> LayerPattern:
    """Parse a frequency: an integer N (one layer in N) or a per-layer list expression."""
    return layer_frequency(text)


def no_rope_freq_type(text: str) -> LayerPattern:
    """Parse which layers skip rotary embeddings: an integer N or a per-layer 0/1 list."""
    return layer_frequency(text)


def la_freq_type(text: str) -> LayerPattern:
    """Parse where linear-attention layers go: an integer N or a per-layer 0/1 list."""
    return layer_frequency(text)


def compress_ratios_type(text: str) -> LayerPattern:
    """Parse per-layer compressed-sparse-attention ratios from a list expression."""
    return layer_pattern(text)


def tuple_type(text: str) -> tuple[int, ...]:
    """Parse ``'1,2'`` or ``'(1,2)'`` into a tuple of ints."""
    return int_tuple(text)
