"""Value types of the model flags: the attention backend enum and the pattern parsers.

Megatron evaluates layer-pattern strings with ``eval`` after a character check; here the
same character check guards :func:`megaplug.parse_pattern`, which never evaluates code.
"""

from __future__ import annotations

import enum
import re
from megaplug import parse_pattern

#: An integer ratio (``4``) or an explicit per-layer list (``[1, 1, 1, 0]``).
LayerPattern = int | list

_NOT_PATTERN = r"[^,\d\[\]\(\)\+\*]"  # compiled when first used, not at import


class AttnBackend(enum.Enum):
    """Attention implementation; member names are what ``--attention-backend`` accepts."""

    __megatron_type__ = "megatron.core.transformer.enums:AttnBackend"

    flash = 1
    fused = 2
    unfused = 3
    local = 4
    auto = 5


def _pattern(text: str) -> LayerPattern:
    """Evaluate a list expression made only of digits, commas, brackets, ``+`` and ``*``."""
    bad = re.search(_NOT_PATTERN, text)
    if bad is not None:
        raise ValueError(
            f"invalid pattern {text!r}: character {bad.group()!r} is not allowed "
            "(use digits, commas, [ ], ( ), + and *)"
        )
    return parse_pattern(text)


def _ratio_or_pattern(text: str) -> LayerPattern:
    """``'4'`` -> 4; ``'([1]*3+[0])*2'`` -> a list of ints."""
    if "[" in text:
        return _pattern(text)
    return int(text)


def moe_freq_type(text: str) -> LayerPattern:
    """Parse a frequency: an integer N (one layer in N) or a per-layer list expression."""
    return _ratio_or_pattern(text)


def no_rope_freq_type(text: str) -> LayerPattern:
    """Parse which layers skip rotary embeddings: an integer N or a per-layer 0/1 list."""
    return _ratio_or_pattern(text)


def la_freq_type(text: str) -> LayerPattern:
    """Parse where linear-attention layers go: an integer N or a per-layer 0/1 list."""
    return _ratio_or_pattern(text)


def compress_ratios_type(text: str) -> LayerPattern:
    """Parse per-layer compressed-sparse-attention ratios from a list expression."""
    return _pattern(text)


def tuple_type(text: str) -> tuple[int, ...]:
    """Parse ``'1,2'`` or ``'(1,2)'`` into a tuple of ints."""
    try:
        return tuple(int(part) for part in text.strip("()").split(","))
    except ValueError:
        raise ValueError(f"expected comma-separated integers such as 128,0, got {text!r}") from None
