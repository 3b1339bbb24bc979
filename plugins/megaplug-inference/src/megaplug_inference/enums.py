"""Enums of the inference plugin, with Megatron's class and member names."""

from __future__ import annotations

import enum


class InferenceCudaGraphScope(enum.Enum):
    """What an inference step captures in CUDA graphs: nothing, each layer, or the whole block."""

    __megatron_type__ = "megatron.core.transformer.enums:InferenceCudaGraphScope"

    none = 0
    layer = 1
    block = 2
