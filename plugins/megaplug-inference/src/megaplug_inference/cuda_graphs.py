"""The inference CUDA-graph scope: its impl-derived default and the scopes each impl allows.

The training plugin owns ``--cuda-graph-impl`` and migrates retired module spellings
(``full_iteration_inference``) into this scope first; this plugin runs after it.
"""

from __future__ import annotations

from typing import Any

from megaplug import Draft

from .enums import InferenceCudaGraphScope as Scope

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
