"""What the facade knows about a namespace, kept outside it.

Megatron pickles ``args`` into every checkpoint, so the namespace must hold nothing but
values: the kernel, the provenance and the warnings live here, in a registry keyed by the
namespace's identity that forgets an entry when its namespace is collected.
"""

from __future__ import annotations

import argparse

# weakref.ref itself, from the built-in module under weakref: the weakref module (WeakSet,
# finalize, ... and their imports) is not on the resolve path (docs/performance.md)
from _weakref import ref as weak_reference

from .._config import Provenance
from .._errors import Problem, ProblemSink
from .._kernel import Kernel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class NamespaceState:
    """The facade's record for one namespace (see :func:`state_of`)."""

    __slots__ = ("kernel", "provenance", "parsed", "problems", "warnings", "extra_dests")

    def __init__(self, kernel: Kernel, provenance: dict[str, Provenance],
                 parsed: dict[str, Any], problems: ProblemSink | None = None,
                 extra_dests: frozenset[str] = frozenset()) -> None:
        self.kernel = kernel
        self.provenance = provenance
        #: The values as parsed, to tell what a caller changed before validate_args.
        self.parsed = parsed
        #: Parse problems not yet reported (reported together with validation's).
        self.problems = problems
        self.warnings: list[Problem] = []
        #: Settings an extra_args_provider declared that no plugin owns.
        self.extra_dests = extra_dests


_STATES: dict[int, tuple[weak_reference, NamespaceState]] = {}


def remember(args: argparse.Namespace, state: NamespaceState) -> None:
    key = id(args)
    _STATES[key] = (weak_reference(args, lambda _ref, key=key: _STATES.pop(key, None)), state)


def state_of(args: argparse.Namespace) -> NamespaceState | None:
    entry = _STATES.get(id(args))
    if entry is None or entry[0]() is not args:
        return None
    return entry[1]
