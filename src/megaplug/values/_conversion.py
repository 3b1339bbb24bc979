"""What the kernel's one conversion (``Kernel.convert``) says when a value does not fit its
setting: the problem naming the setting, the source the value came from and what to give."""

from __future__ import annotations

from .._errors import Problem, shorten
from .._options import choice_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._options import FlagSpec


#: How a conversion problem names where the value came from.
_SUBJECTS = {
    "command-line": "{primary}",
    "config-file": "{primary} in config file {detail}",
    "environment": "environment variable {detail}={raw} is not valid",
    "caller-default": "{dest} in the caller's defaults",
    "checkpoint": "{dest} in the checkpoint arguments of {detail}",
    "namespace": "{dest} set on the namespace before validate_args",
}


def conversion_problem(spec: FlagSpec, raw: Any, reason: str, source: str,
                        detail: str) -> Problem:
    """The problem of ``raw`` (from ``source``, ``detail``: a path, a variable) refused
    for ``spec`` because ``reason``."""
    name = detail if source == "environment" else spec.primary
    subject = _SUBJECTS.get(source, "{primary} from {source} {detail}").format(
        primary=spec.primary, dest=spec.dest, detail=detail, source=source,
        raw=shorten(repr(raw), 100))
    kind = "finite float" if spec.type is float else spec.type_name or "text"
    hint = ("choose from " + ", ".join(map(choice_name, spec.choices))
            if spec.choices is not None else
            f"give {name} a number, text, true or false, or a list of these"
            if spec.kind == "computed" else f"give {name} true or false"
            if spec.action in ("store_true", "store_false", "boolean_optional")
            else f"give {name} {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} value")
    return Problem(f"{subject}: {reason}", (name,), hint, spec.plugin)
