"""The ``--pipeline-model-parallel-layout`` language, parsed without ``eval``.

A layout lists what each pipeline stage holds, stage after stage: ``E`` is the input
embedding, ``t`` a transformer decoder layer, ``m`` a multi-token-prediction layer and ``L``
the loss. ``|`` ends a stage (``||`` leaves a stage empty), ``X*N`` or ``(...)*N`` repeats
an item or a group ``N`` times, and commas are cosmetic. ``"E|(t|)*3,m|L"`` therefore
describes six stages: ``[E] [t] [t] [t] [m] [L]``.
"""

from __future__ import annotations

#: Layer symbols a layout may contain.
LAYER_SYMBOLS = {"E": "embedding", "t": "decoder layer", "m": "MTP layer", "L": "loss"}

#: Largest expansion accepted, so a short string cannot ask for gigabytes.
MAX_EXPANDED = 1_000_000

STAGE_SEPARATOR = "|"


class LayoutError(ValueError):
    """A layout string that does not follow the layout language."""


class PipelineLayout:
    """A parsed layout: the symbols held by each stage, in order."""

    # A plain class: a dataclass would import inspect, and a NamedTuple compiles its
    # methods when the module is imported, in every resolve (docs/performance.md).
    __slots__ = ("stages",)

    def __init__(self, stages: tuple[tuple[str, ...], ...]) -> None:
        self.stages = stages

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PipelineLayout) and self.stages == other.stages

    def __hash__(self) -> int:
        return hash(self.stages)

    def __repr__(self) -> str:
        return f"PipelineLayout(stages={self.stages!r})"

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    def count(self, symbol: str) -> int:
        """How many times ``symbol`` appears over all stages."""
        return sum(stage.count(symbol) for stage in self.stages)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text.replace(",", "").replace(" ", "")
        self.position = 0

    def fail(self, message: str) -> LayoutError:
        return LayoutError(f"{message} at position {self.position} in {self.text!r}")

    def peek(self) -> str:
        return self.text[self.position] if self.position < len(self.text) else ""

    def sequence(self) -> str:
        """Items up to a ``)`` or the end, expanded to a flat string of symbols."""
        parts: list[str] = []
        length = 0
        while self.peek() not in ("", ")"):
            item = self.repeated(self.atom())
            length += len(item)
            if length > MAX_EXPANDED:
                raise LayoutError(
                    f"layout {self.text!r} expands to more than {MAX_EXPANDED} entries")
            parts.append(item)
        return "".join(parts)

    def atom(self) -> str:
        char = self.peek()
        if char == "(":
            self.position += 1
            inner = self.sequence()
            if self.peek() != ")":
                raise self.fail("missing ')'")
            self.position += 1
            return inner
        if char in LAYER_SYMBOLS or char == STAGE_SEPARATOR:
            self.position += 1
            return char
        known = ", ".join(LAYER_SYMBOLS)
        raise self.fail(f"unexpected {char!r} (layer symbols are {known}, '|' ends a stage)")

    def repeated(self, item: str) -> str:
        if self.peek() != "*":
            return item
        self.position += 1
        start = self.position
        while self.peek().isdigit():
            self.position += 1
        if start == self.position:
            raise self.fail("'*' must be followed by a repeat count")
        count = int(self.text[start:self.position])
        if len(item) * count > MAX_EXPANDED:
            raise LayoutError(f"layout {self.text!r} expands to more than {MAX_EXPANDED} entries")
        return item * count


def parse_layout(text: str) -> PipelineLayout:
    """Parse a layout string into its stages; raise :class:`LayoutError` when malformed."""
    parser = _Parser(text)
    flat = parser.sequence()
    if parser.peek():
        raise parser.fail("unmatched ')'")
    stages = tuple(tuple(stage) for stage in flat.split(STAGE_SEPARATOR))
    return PipelineLayout(stages)
