"""megaplug inference plugin: the inference engine's flags, derivations and checks.

Declares dynamic batching, prefix caching, KV cache, speculative decoding and CUDA-graph
scope settings; migrates the retired ``--cuda-graph-modules full_iteration_inference`` and
normalizes the inference CUDA-graph scope into an enum (after the training plugin has
normalized ``--cuda-graph-impl``), maps Mamba state dtypes, and checks what the chosen
CUDA-graph implementation, parallelism and fp8 recipe allow.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

__all__ = ["InferenceCudaGraphScope", "InferenceOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="inference",
    description="Inference engine: dynamic batching, prefix caching, KV cache, CUDA-graph scope.",
    # training normalizes --cuda-graph-impl and the module list first; this plugin migrates
    # the retired module spelling that now means an inference scope, then the scope.
    after=("training",),
    # named, not imported: each module is imported when a resolve first runs the phase
    rules=Rules(normalize=("megaplug_inference.cuda_graphs:NORMALIZATIONS",),
                derive=("megaplug_inference.engine:DERIVATIONS",),
                validate=("megaplug_inference.cuda_graphs:CHECKS",
                          "megaplug_inference.engine:CHECKS")),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the inference flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import InferenceOptions, declare_untyped_flags

    flags.add_options(InferenceOptions)
    declare_untyped_flags(flags)


def __getattr__(name: str) -> object:
    if name == "InferenceOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    if name == "InferenceCudaGraphScope":  # from the enums module, likewise
        from . import enums

        return getattr(enums, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
