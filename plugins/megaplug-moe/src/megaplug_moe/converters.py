"""Parsers of the MoE flags that take structured text (``type=`` of their flags)."""

from __future__ import annotations

import json

from megaplug import layer_frequency

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union


def moe_freq_type(text: Union[str, int]) -> Union[int, list]:
    """Parse ``--moe-layer-freq``: ``N`` (one MoE layer every N layers) or a 0/1 list pattern
    such as ``([1]*3+[0]*1)*3`` (megaplug's one layer-frequency parser, shared with the model
    plugin's frequencies and the Megatron facade)."""
    return layer_frequency(text)


def json_value(text: str) -> Any:
    """Parse a JSON document (``--moe-megakernel-backend-config``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at position {exc.pos}") from None


json_value.__name__ = "loads"
