"""The training plugin: batch sizes, training length, schedules, optimizers, recomputation,
CUDA graphs, profiling, the rerun engine and deterministic mode.

Reads the parallel layout (``data_parallel_size``) derived by the ``parallel`` plugin, and
a few other plugins' values through ``config.get`` so it works whether or not they are
installed.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

#: Each phase's rules, named by the module that holds them (imported when the phase first
#: runs, so listing or documenting the plugin imports none), in the order they run.
rules = Rules(
    # retired flags become their replacements, and CUDA graph modules become enum members
    normalize=(f"{__name__}.optimizer:NORMALIZE", f"{__name__}.recompute:NORMALIZE",
               f"{__name__}.cuda_graphs:NORMALIZE"),
    derive=(f"{__name__}.batch:DERIVE", f"{__name__}.kernels:DERIVE",
            f"{__name__}.schedule:DERIVE", f"{__name__}.kernels:DERIVE_FUSIONS",
            f"{__name__}.optimizer:DERIVE", f"{__name__}.recompute:DERIVE",
            f"{__name__}.cuda_graphs:DERIVE"),
    validate=(f"{__name__}.batch:VALIDATE", f"{__name__}.schedule:VALIDATE",
              f"{__name__}.recompute:VALIDATE", f"{__name__}.kernels:VALIDATE",
              f"{__name__}.optimizer:VALIDATE", f"{__name__}.cuda_graphs:VALIDATE"),
)

megaplug_plugin = PluginInfo(
    name="training",
    description="Batch sizes, training length, learning-rate schedules, optimizers, "
                "recomputation, CUDA graphs, profiling and deterministic mode.",
    options=f"{__name__}.options:TrainingOptions",
    after=("parallel",),
    rules=rules,
)
