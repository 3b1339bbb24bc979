"""The parser of ``--triton-autotune-block-sizes`` entries (its flag's ``type=``)."""

from __future__ import annotations


def parse_block_size(text: str) -> tuple[str, int]:
    """``'BLOCK_M=64'`` -> ``('BLOCK_M', 64)``; the name starts with BLOCK, the size is > 0."""
    name, separator, size = text.partition("=")
    if separator and name.startswith("BLOCK") and name.isidentifier():
        try:
            value = int(size)
        except ValueError:
            value = 0
        if value > 0:
            return name, value
    raise ValueError("expected BLOCK_NAME=positive_integer, e.g. BLOCK_SIZE=128")


parse_block_size.__name__ = "block size"
