"""megaplug inference plugin: the inference engine's flags, derivations and checks.

Declares dynamic batching, prefix caching, KV cache, speculative decoding and CUDA-graph
scope settings; migrates the retired ``--cuda-graph-modules full_iteration_inference`` and
normalizes the inference CUDA-graph scope into an enum (after the training plugin has
normalized ``--cuda-graph-impl``), maps Mamba state dtypes, and checks what the chosen
CUDA-graph implementation, parallelism and fp8 recipe allow.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="inference",
    description="Inference engine: dynamic batching, prefix caching, KV cache, CUDA-graph scope.",
    options="megaplug_inference.options:declare",
    # training normalizes --cuda-graph-impl and the module list first; this plugin migrates
    # the retired module spelling that now means an inference scope, then the scope.
    after=("training",),
    # named, not imported: each module is imported when a resolve first runs the phase
    rules=Rules(normalize=("megaplug_inference.cuda_graphs:NORMALIZATIONS",),
                derive=("megaplug_inference.engine:DERIVATIONS",),
                validate=("megaplug_inference.cuda_graphs:CHECKS",
                          "megaplug_inference.engine:CHECKS")),
)
