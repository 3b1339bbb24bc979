"""Parsers of the MoE flags that take structured text (``type=`` of their flags)."""

from __future__ import annotations

import json

from megaplug import PatternError, parse_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union


def moe_freq_type(text: Union[str, int]) -> Union[int, list]:
    """Parse ``--moe-layer-freq``: ``N`` (one MoE layer every N layers) or a 0/1 list pattern.

    A value containing ``[`` is a list expression such as ``([1]*3+[0]*1)*3``; anything
    else must be an integer. Raises ``ValueError`` with a readable message otherwise.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    if isinstance(text, list):
        return text
    if "[" in text:
        try:
            value = parse_pattern(text)
        except PatternError as exc:
            raise ValueError(str(exc)) from None
        if not isinstance(value, list):
            raise ValueError(f"{text!r} does not evaluate to a list of 0/1 layer flags")
        return value
    try:
        return int(text)
    except ValueError:
        raise ValueError(
            f"expected an integer or a list pattern such as '([1]*3+[0]*1)*3', got {text!r}"
        ) from None


def json_value(text: str) -> Any:
    """Parse a JSON document (``--moe-megakernel-backend-config``)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at position {exc.pos}") from None


json_value.__name__ = "loads"
