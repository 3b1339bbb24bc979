"""The inference CUDA-graph scope: its impl-derived default and the scopes each impl allows.

The training plugin owns ``--cuda-graph-impl`` and the module list; this plugin runs after
it and migrates the retired module spelling ``full_iteration_inference`` into this scope.
"""

from __future__ import annotations


from megaplug import Draft

from .enums import InferenceCudaGraphScope as Scope

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: Inference captures graphs only with Megatron's own (local) implementation, and with it
#: always does: per layer or per block (megatron.core's table of allowed scopes).
ALLOWED_SCOPES: dict[str, frozenset[Scope]] = {
    "none": frozenset({Scope.none}),
    "local": frozenset({Scope.layer, Scope.block}),
    "transformer_engine": frozenset({Scope.none}),
    "full_iteration": frozenset({Scope.none}),
}

#: The scope when none is given: local graphs capture each layer, as before scopes existed.
DEFAULT_SCOPE: dict[str, Scope] = {"local": Scope.layer}


def as_scope(value: Any, impl: str) -> Scope:
    """A scope member from a name, a member (of any enum of that name) or None (the default)."""
    if value is None:
        return DEFAULT_SCOPE.get(impl, Scope.none)
    if isinstance(value, Scope):
        return value
    name = str(getattr(value, "name", value))
    return Scope[name.rsplit(".", 1)[-1]]


def normalize_scope(config: Draft) -> None:
    """Turn the scope into an InferenceCudaGraphScope member, filling the impl's default."""
    raw = config.inference_cuda_graph_scope
    impl = config.get("cuda_graph_impl", "none")
    try:
        scope = as_scope(raw, impl)
    except KeyError:
        config.error(f"--inference-cuda-graph-scope {raw!r} is not a scope",
                     flags=("inference_cuda_graph_scope",),
                     hint="choose none, layer or block")
        return
    if scope is not raw:
        reason = f"default for --cuda-graph-impl {impl}" if raw is None else "scope name"
        config.set("inference_cuda_graph_scope", scope, reason=reason,
                   inputs=("inference_cuda_graph_scope", "cuda_graph_impl"))


def check_scope_allowed(config: Draft) -> None:
    """Each CUDA-graph implementation supports only some inference scopes."""
    scope = config.inference_cuda_graph_scope
    impl = config.get("cuda_graph_impl", "none")
    allowed = ALLOWED_SCOPES.get(impl)
    if not isinstance(scope, Scope) or allowed is None or scope in allowed:
        return
    names = ", ".join(member.name for member in Scope if member in allowed)
    hint = ("use --cuda-graph-impl local for inference CUDA graphs"
            if scope is not Scope.none else
            f"choose {' or '.join(m.name for m in Scope if m in allowed)}, or leave the scope "
            "unset (local graphs capture each layer)")
    config.error(f"--inference-cuda-graph-scope {scope.name} is not supported with "
                 f"--cuda-graph-impl {impl} (supported: {names})",
                 flags=("inference_cuda_graph_scope", "cuda_graph_impl"), hint=hint)


def check_num_cuda_graphs(config: Draft) -> None:
    """With local CUDA graphs, the dynamic-batching graph count is positive or -1 (automatic)."""
    count = config.inference_dynamic_batching_num_cuda_graphs
    if config.get("cuda_graph_impl", "none") == "local" and count <= 0 and count != -1:
        config.error(f"--inference-dynamic-batching-num-cuda-graphs must be a positive number "
                     f"or -1 with --cuda-graph-impl local, got {count}",
                     flags=("inference_dynamic_batching_num_cuda_graphs", "cuda_graph_impl"),
                     hint="give a positive count, or -1 to derive it from the request limit")


#: Retired ``--cuda-graph-modules`` spellings and the explicit scopes (by name; None for
#: unset) each may be combined with. The training plugin, which owns the module list, drops
#: them from it and migrates ``full_iteration`` to ``--cuda-graph-impl``; the scope part is
#: this plugin's.
RETIRED_MODULE_SCOPES: dict[str, tuple[str | None, ...]] = {
    "full_iteration": (None, "none"),
    "full_iteration_inference": (None, "block"),
}


def _retired_module_given(config: Draft) -> str | None:
    """The one retired spelling the user gave for the module list (or its retired alias)."""
    given = (config.given_value("cuda_graph_modules")
             or config.given_value("cuda_graph_scope_deprecated") or [])
    retired = {str(item) for item in given if str(item) in RETIRED_MODULE_SCOPES}
    return retired.pop() if len(retired) == 1 else None  # several: training reports it


def migrate_retired_module_spelling(config: Draft) -> None:
    """``--cuda-graph-modules full_iteration_inference`` means ``--inference-cuda-graph-scope
    block`` with local CUDA graphs; neither retired spelling goes with another scope."""
    spelling = _retired_module_given(config)
    if spelling is None:
        return
    raw = config.inference_cuda_graph_scope
    scope = None if raw is None else str(getattr(raw, "name", raw)).rsplit(".", 1)[-1]
    allowed = RETIRED_MODULE_SCOPES[spelling]
    if scope not in allowed:
        config.error(f"--cuda-graph-modules {spelling} cannot be combined with "
                     f"--inference-cuda-graph-scope {scope}",
                     flags=("cuda_graph_modules", "inference_cuda_graph_scope"),
                     hint=f"drop {spelling}, or use --inference-cuda-graph-scope {allowed[1]}")
        return
    impl = config.get("cuda_graph_impl", "none")
    if spelling != "full_iteration_inference" or impl not in ("none", "local"):
        return  # an impl it cannot be combined with is the training plugin's to report
    if impl == "none":
        config.warn(f"--cuda-graph-modules {spelling} is deprecated and has no effect with "
                    "--cuda-graph-impl none; use --cuda-graph-impl local with "
                    "--inference-cuda-graph-scope block for inference CUDA graphs",
                    flags=("cuda_graph_modules",))
        return
    config.warn(f"--cuda-graph-modules {spelling} is deprecated; setting "
                "--inference-cuda-graph-scope=block instead",
                flags=("cuda_graph_modules", "inference_cuda_graph_scope"))
    config.set("inference_cuda_graph_scope", "block", reason=f"retired --cuda-graph-modules "
               f"{spelling}", inputs=("cuda_graph_modules",))


def check_block_scope_fp8(config: Draft) -> None:
    """fp8 under block-scoped inference CUDA graphs: inference-optimized layers and MXFP8."""
    scope = config.inference_cuda_graph_scope
    if config.get("fp8") is None or str(getattr(scope, "name", scope)) != "block":
        return
    flags = ("fp8", "inference_cuda_graph_scope")
    if config.get("transformer_impl") != "inference_optimized":
        config.error("fp8 with --inference-cuda-graph-scope block needs --transformer-impl "
                     "inference_optimized", flags=(*flags, "transformer_impl"),
                     hint="use --transformer-impl inference_optimized")
    recipe = config.get("fp8_recipe")
    if recipe != "mxfp8":
        config.error("fp8 with --inference-cuda-graph-scope block supports only "
                     f"--fp8-recipe mxfp8, got {recipe}", flags=(*flags, "fp8_recipe"),
                     hint="use --fp8-recipe mxfp8")


# the retired module spelling becomes a scope before the scope is normalized
NORMALIZATIONS: tuple[Callable[[Draft], None], ...] = (
    migrate_retired_module_spelling,
    normalize_scope,
)
CHECKS: tuple[Callable[[Draft], None], ...] = (
    check_scope_allowed,
    check_num_cuda_graphs,
    check_block_scope_fp8,
)
