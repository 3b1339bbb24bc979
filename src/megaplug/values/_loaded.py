"""Values loaded from a file, ``--defaults``, a checkpoint or a caller, checked as the
command line checks its text.

A config file holds JSON values, not the text typed after a flag; a flag's ``type`` reads
text. So a loaded value for a flag with a parser type is the value whose JSON form (what
megaplug writes: :func:`megaplug.values._encoding.encode`) it is: one of the flag's choices
whose form it is (``exit_signal: 10``), a value of the type itself (``onnx_safe: false``
for ``type=bool``), or what the parser makes of the value written as a flag's text --
JSON (``[1, 0, 1]``), or a list's items joined as a tuple (``128,0``) or a pair
(``BLOCK_SIZE=128``) -- that reads back as the loaded value exactly. Anything else is
refused: a value is never taken as something it does not write back as (``false`` read by
``bool("false")`` is True). A list setting holds as many values as its ``nargs`` lets the
command line give, and a text is one value, never split at its spaces.
"""

from __future__ import annotations

from .._errors import shorten
from ._encoding import encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

#: How much of a value a message quotes.
_SHOWN_CHARS = 100


def loaded_items(raw: Any, nargs: int | str) -> list[Any]:
    """A loaded value of a list setting as its items, as many as ``nargs`` lets the command
    line give (one conversion, one check): an int exactly that many, ``+`` at least one --
    even where the declared default is empty, which the command line cannot give either
    --, ``*`` any; a value that is not a list is one item (a text is not split at its
    spaces). ``ValueError`` says how many were expected."""
    items = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    if isinstance(nargs, int) and len(items) != nargs:
        raise ValueError(f"expected {nargs} value{'s' if nargs != 1 else ''}, got "
                         f"{len(items)}: {shorten(repr(raw), _SHOWN_CHARS)}")
    if nargs == "+" and not items:
        raise ValueError("expected at least one value, got none")
    return items


def from_loaded(raw: Any, parse: Callable[[str], Any], choices: Sequence[Any] | None) -> Any:
    """The value of a parser-typed flag whose JSON form the loaded ``raw`` is, or
    ``ValueError`` (the parser's own error where it refused the text)."""
    for choice in choices or ():
        if same_json(encode(choice), raw):
            return choice
    if isinstance(parse, type) and type(raw) is parse:
        return raw  # type=bool and a loaded bool: the value itself
    refusal: Exception | None = None
    read_as: Any = None
    for text in _texts(raw):
        try:
            value = parse(text)
        except RecursionError:
            raise  # nesting too deep for the parser: its caller names it
        except (TypeError, ValueError, ArithmeticError) as exc:
            refusal = refusal or exc
            continue
        except Exception as exc:  # noqa: BLE001 -- a plugin's parser raising its own kind
            refusal = refusal or ValueError(str(exc))
            continue
        if same_json(encode(value), encode(raw)):
            return value
        read_as = value if read_as is None else read_as
    if read_as is not None and refusal is None:
        raise ValueError(f"it would read back as {shorten(repr(encode(read_as)), _SHOWN_CHARS)}")
    raise refusal if refusal is not None else ValueError("not a value this flag takes")


def _texts(raw: Any) -> list[str]:
    """The texts a loaded value may have been typed as: JSON (compact and spaced), and a
    list's scalar items joined as a tuple (``128,0``) or a pair (``BLOCK_SIZE=128``)."""
    import json

    texts = [json.dumps(raw, separators=(",", ":")), json.dumps(raw)]
    if isinstance(raw, (list, tuple)) and raw and all(
            type(item) in (str, int, float) for item in raw):
        texts.append(",".join(map(str, raw)))
        if len(raw) == 2:
            texts.append("=".join(map(str, raw)))
    return list(dict.fromkeys(texts))


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: the same kinds throughout (``1`` is not ``True``, ``"1"`` not
    ``1``), lists and tuples alike, ints and floats by value."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[key], b[key]) for key in a)
    if type(a) in (int, float) and type(b) in (int, float):
        return a == b  # a whole float written as an int (``clip_grad: 1``) is that float
    return type(a) is type(b) and a == b
