"""The training plugin: batch sizes, training length, schedules, optimizers, recomputation,
CUDA graphs, profiling, the rerun engine and deterministic mode.

Reads the parallel layout (``data_parallel_size``) derived by the ``parallel`` plugin, and
a few other plugins' values through ``config.get`` so it works whether or not they are
installed.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules


def _named(*references: str) -> tuple[str, ...]:
    """Rule tables of this package's modules (``"module:TABLE"``), named for the kernel."""
    return tuple(f"{__name__}.{reference}" for reference in references)


#: Each phase's rules, named by the module that holds them (imported when the phase first
#: runs, so listing or documenting the plugin imports none), in the order they run.
rules = Rules(
    # retired flags become their replacements, and CUDA graph modules become enum members
    normalize=_named("optimizer:NORMALIZE", "recompute:NORMALIZE", "cuda_graphs:NORMALIZE"),
    derive=_named("batch:DERIVE", "kernels:DERIVE", "schedule:DERIVE", "kernels:DERIVE_FUSIONS",
                  "optimizer:DERIVE", "recompute:DERIVE", "cuda_graphs:DERIVE"),
    validate=_named("batch:VALIDATE", "schedule:VALIDATE", "recompute:VALIDATE",
                    "kernels:VALIDATE", "optimizer:VALIDATE", "cuda_graphs:VALIDATE"),
)

megaplug_plugin = PluginInfo(
    name="training",
    description="Batch sizes, training length, learning-rate schedules, optimizers, "
                "recomputation, CUDA graphs, profiling and deterministic mode.",
    options=f"{__name__}.options:TrainingOptions",
    after=("parallel",),
    rules=rules,
)
