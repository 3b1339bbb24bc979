"""Number helpers the plugins' messages share: a size's divisors, a list said in words.

Written once, below the plugins, and defined for every integer: sizes reach messages as
the user gave them -- ``WORLD_SIZE=-1``, ``--num-layers -1``, ``0`` -- and a helper that
assumed a positive number (``math.isqrt`` of a negative, the last item of an empty list)
turned a mistake worth a hint into "this is a bug in the plugin".
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

#: Divisors are searched up to this bound (and their cofactors added): every size a person
#: means, and never a search as long as a mistyped huge number.
_SEARCHED = 100_000


def divisors(number: int) -> list[int]:
    """The positive divisors of ``number`` (of its magnitude: ``-6`` -> ``[1, 2, 3, 6]``),
    ascending; ``[]`` for 0. A huge number's are those up to a bound, with cofactors."""
    import math

    magnitude = abs(int(number))
    small = [d for d in range(1, min(math.isqrt(magnitude), _SEARCHED) + 1) if magnitude % d == 0]
    return sorted({*small, *(magnitude // d for d in small)})


def spoken(items: Sequence[Any], empty: str = "none") -> str:
    """``[1, 2, 4]`` -> ``'1, 2 or 4'``; ``empty`` for no items."""
    words = [str(item) for item in items]
    if not words:
        return empty
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
