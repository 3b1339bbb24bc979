"""megaplug inference plugin: the inference engine's flags, derivations and checks.

Declares dynamic batching, prefix caching, KV cache, speculative decoding and CUDA-graph
scope settings; migrates the retired ``--cuda-graph-modules full_iteration_inference`` and
normalizes the inference CUDA-graph scope into an enum (after the training plugin has
normalized ``--cuda-graph-impl``), maps Mamba state dtypes, and checks what the chosen
CUDA-graph implementation, parallelism and fp8 recipe allow.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import cuda_graphs, engine
from .enums import InferenceCudaGraphScope

__all__ = ["InferenceCudaGraphScope", "InferenceOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="inference",
    description="Inference engine: dynamic batching, prefix caching, KV cache, CUDA-graph scope.",
    # training normalizes --cuda-graph-impl and the module list first; this plugin migrates
    # the retired module spelling that now means an inference scope, then the scope.
    after=("training",),
    rules=Rules(normalize=(cuda_graphs.migrate_retired_module_spelling,
                           cuda_graphs.normalize_scope),
                derive=(engine.derive_state_dtypes,),
                validate=(cuda_graphs.check_scope_allowed, cuda_graphs.check_num_cuda_graphs,
                          cuda_graphs.check_block_scope_fp8, engine.check_batch_split_threshold)),
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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
