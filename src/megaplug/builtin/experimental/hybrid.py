"""The hybrid layer pattern language (``--hybrid-layer-pattern``).

A pattern is one symbol per layer: ``M`` Mamba, ``G`` gated delta net, ``*`` attention,
``D`` DeepSeek sparse attention, ``+`` multi-latent attention, ``-`` MLP, ``E`` mixture of
experts. ``|`` splits the main pattern into pipeline segments (an explicit pipeline layout, possibly several
segments per pipeline rank), and ``/`` appends multi-token-prediction (MTP) depths: in
``"M*M*|M-M-/M*/M*"`` the main model is ``M*M*|M-M-`` (8 layers in 2 segments) and there
are two MTP depths of pattern ``M*``. All MTP depths repeat the same pattern.
"""  # noqa: E501

from __future__ import annotations

LAYER_SYMBOLS = {
    "M": "Mamba",
    "G": "gated delta net",
    "*": "attention",
    "D": "DeepSeek sparse attention",
    "+": "multi-latent attention",
    "-": "MLP",
    "E": "mixture of experts",
}
PIPE = "|"
MTP_SEPARATOR = "/"


class HybridPatternError(ValueError):
    """A hybrid layer pattern that does not follow the pattern language."""


class HybridPattern:
    """A parsed pattern: the main layers (with pipeline separators) and the MTP part."""

    # A plain class: a dataclass would import inspect, and a NamedTuple compiles its
    # methods when the module is imported, in every resolve (docs/performance.md).
    __slots__ = ("main", "mtp", "mtp_depths")

    def __init__(self, main: str, mtp: str | None, mtp_depths: int) -> None:
        self.main, self.mtp, self.mtp_depths = main, mtp, mtp_depths

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, HybridPattern)
                and (self.main, self.mtp, self.mtp_depths)
                == (other.main, other.mtp, other.mtp_depths))

    def __hash__(self) -> int:
        return hash((self.main, self.mtp, self.mtp_depths))

    def __repr__(self) -> str:
        return f"HybridPattern(main={self.main!r}, mtp={self.mtp!r}, mtp_depths={self.mtp_depths})"

    @property
    def layer_count(self) -> int:
        """Layers of the main model (pipeline separators and MTP depths not counted)."""
        return len(self.main.replace(PIPE, ""))

    @property
    def pipeline_segments(self) -> int:
        """Pipeline segments the main pattern describes (1 when it has no ``|``)."""
        return self.main.count(PIPE) + 1

    @property
    def has_pipes(self) -> bool:
        return PIPE in self.main


def _check_symbols(part: str, where: str, allow_pipes: bool) -> None:
    for position, symbol in enumerate(part):
        if symbol in LAYER_SYMBOLS or (allow_pipes and symbol == PIPE):
            continue
        if symbol == PIPE:
            raise HybridPatternError(f"{where} may not contain '|' (position {position}); "
                                     "pipeline segments belong to the main pattern")
        known = ", ".join(f"{s} ({name})" for s, name in LAYER_SYMBOLS.items())
        raise HybridPatternError(f"{where} has unknown layer symbol {symbol!r} at position "
                                 f"{position}; known symbols: {known}")


def parse_hybrid_pattern(text: str) -> HybridPattern:
    """Split and check a pattern; raise :class:`HybridPatternError` when malformed."""
    main, *depths = text.split(MTP_SEPARATOR)
    _check_symbols(main, "the main pattern", allow_pipes=True)
    if not depths:
        return HybridPattern(main, None, 0)
    first = depths[0]
    for index, depth in enumerate(depths, start=1):
        if not depth:
            raise HybridPatternError(f"MTP depth {index} is empty; write its layers after '/'")
        if depth != first:
            raise HybridPatternError(f"all MTP depths must repeat one pattern, but depth 1 is "
                                     f"{first!r} and depth {index} is {depth!r}")
    _check_symbols(first, "the MTP pattern", allow_pipes=False)
    return HybridPattern(main, first, len(depths))


def unified_pattern(main: str | None, mtp: str, depths: int) -> str:
    """The unified spelling of a main pattern plus ``depths`` repeats of a legacy MTP pattern."""
    return (main or "") + MTP_SEPARATOR + MTP_SEPARATOR.join([mtp] * depths)
