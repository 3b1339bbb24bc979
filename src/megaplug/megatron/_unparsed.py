"""What ``validate_args`` knows of a namespace it did not parse: a copy, a pickle, one built
by hand.

Frameworks around Megatron copy ``args`` (``copy.deepcopy``, ``Namespace(**vars(args))``,
a pickle round trip) before validating it; the copy is not the namespace the facade
parsed, so its provenance is not known. Megatron's ``validate_args`` judges values alone,
and so does the facade then: a value equal to its declared default is that default, any
other value was given. A namespace that lacks settings the plugins read is one problem
naming them, as Megatron would stop at the first missing attribute. A plugin none of
whose settings is on the namespace was blocked where it was parsed (``-p no:NAME``), and is
left out of its validation too (built-ins excepted: their settings are Megatron's own).
"""

from __future__ import annotations

from .._api import load
from .._config import Provenance
from .._errors import Problem
from .._kernel import Kernel
from ..environment import TargetEnvironment
from ..values._encoding import fresh
from ._state import NamespaceState, state_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping

#: How a given value on a namespace the facade did not parse is described.
UNPARSED = "on a namespace megaplug did not parse"
#: Missing settings named one by one in the problem; the rest are counted.
_NAMED = 12


def read_namespace(args: Any, environ: Mapping[str, str], target: TargetEnvironment | None,
                   to_megaplug: Callable[[Mapping[str, Any], Kernel], dict[str, Any]],
                   ) -> tuple[NamespaceState, dict[str, Any], Problem | None]:
    """What ``validate_args`` works from: the namespace's record (the facade's, or one made
    from its values alone), its values in megaplug's types (``to_megaplug``), and the
    problem naming the settings it lacks, if any."""
    state = state_of(args)
    kernel = state.kernel if state is not None else kernel_for(vars(args), environ, target)
    values = to_megaplug(vars(args), kernel)
    lacking = missing_settings(kernel, values)
    return state or unparsed_state(kernel, values), values, lacking


def kernel_for(values: Mapping[str, Any], environ: Mapping[str, str],
               target: TargetEnvironment | None = None) -> Kernel:
    """The kernel to validate a namespace the facade did not parse: the plugins the
    environment selects (with the flags of ``target``'s release), less each feature plugin
    none of whose settings it holds."""
    kernel = load((), environ=environ, target=target)[0]
    absent = [record.name for record in kernel.plugins.active() if record.source != "builtin"
              and (specs := kernel.table.plugin_specs(record.name))
              and not any(spec.dest in values for spec in specs)]
    if not absent:
        return kernel
    return load([token for name in absent for token in ("-p", f"no:{name}")],
                environ=environ, target=target)[0]


def unparsed_state(kernel: Kernel, values: dict[str, Any]) -> NamespaceState:
    """A record for a namespace the facade did not parse: each value equal to its declared
    default is that default, any other was given (as a caller's edit of the namespace)."""
    defaults: dict[str, Provenance] = {}
    provenance: dict[str, Provenance] = {}
    for key, value in values.items():
        specs = kernel.table.by_dest.get(key)
        plugin = specs[0].plugin if specs else None
        if specs and _is_default(value, specs[0].default):
            if plugin not in defaults:
                defaults[plugin] = Provenance("default", plugin=plugin)  # type: ignore[index]
            provenance[key] = defaults[plugin]  # type: ignore[index]
        else:
            provenance[key] = Provenance("caller-default", UNPARSED, plugin, value=value)
    return NamespaceState(kernel, provenance, dict(values))


def _is_default(value: Any, default: Any) -> bool:
    """Whether a value is its setting's declared default: the same type and equal (``1`` is
    not ``True``, ``1.0`` not ``1``)."""
    return value is default or (type(value) is type(default) and value == default)


def missing_settings(kernel: Kernel, values: dict[str, Any]) -> Problem | None:
    """The one problem for a namespace lacking settings the plugins declare (None if it
    lacks none). A missing computed setting is filled with its declared default in
    ``values``: plugins derive it, no caller sets it."""
    missing: list[str] = []
    for dest, specs in kernel.table.by_dest.items():
        if dest in values:
            continue
        if specs[0].kind == "computed":
            values[dest] = fresh(specs[0].default)
        else:
            missing.append(dest)
    if not missing:
        return None
    named = ", ".join(missing[:_NAMED])
    more = f" and {len(missing) - _NAMED} more" if len(missing) > _NAMED else ""
    return Problem(
        f"the namespace given to validate_args lacks {len(missing)} setting"
        f"{'s' if len(missing) != 1 else ''} the plugins read: {named}{more}",
        tuple(kernel.table.spelling(dest) for dest in missing[:_NAMED]),
        "make it with megaplug.megatron.parse_args (a copy of its namespace is fine), or set "
        "each missing setting; a namespace validate_args already validated lacks the retired "
        "settings it removed")
