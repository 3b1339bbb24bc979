"""How deep a loaded value may nest.

A setting's value is a number, a text, or a short list or mapping of them; every
recursive walk over values (encoding, copying, Megatron's types, comparing) takes a few
interpreter frames per level. A value nested deeper than :data:`MAX_NESTING` -- from a
file, ``--defaults`` or a flag's JSON text -- is refused where it is read, rather than
ending in ``RecursionError`` somewhere later.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: Levels of lists and mappings a value may have (no setting needs a tenth of it).
MAX_NESTING = 100


def too_deep(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether ``value`` nests lists, tuples or mappings more than ``limit`` levels deep
    (a value that contains itself does). Walks without recursion, each shared part (a
    YAML alias) once per depth it is met at."""
    if not isinstance(value, (list, tuple, dict)):
        return False
    explored: dict[int, int] = {}
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if explored.get(id(item), 0) >= depth:
            continue
        explored[id(item)] = depth
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, (list, tuple, dict)))
    return False


#: Why a value too deep is refused, in every message that refuses one.
TOO_DEEP = f"nested too deeply (more than {MAX_NESTING} levels)"


def converted(convert: Callable[..., Any], *args: Any) -> Any:
    """``convert(*args)`` -- a flag's converter on its text, or on a loaded value -- unless
    the value nests too deep, or the converter's own walk over it recursed too deep:
    then :class:`ValueError` (:data:`TOO_DEEP`)."""
    try:
        value = convert(*args)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
    if isinstance(value, (list, dict)) and too_deep(value):
        raise ValueError(TOO_DEEP)
    return value
