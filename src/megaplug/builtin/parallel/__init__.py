"""Parallelism: tensor, pipeline (incl. virtual stages), context and data parallelism,
process-group set-up, DDP and the distributed optimizer.

Derives ``data_parallel_size``, ``transformer_pipeline_model_parallel_size`` and
``virtual_pipeline_model_parallel_size``; reads ``RANK`` and ``WORLD_SIZE``. A feature plugin
that groups data-parallel ranks further refines ``data_parallel_size`` after this one; the
experimental plugin's hybrid layer pattern may set the virtual pipeline size first. Features
that change what one of these rules should say take the rule over while they are in use
(``Rules.supersede``), so these rules never name a feature's settings.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

#: Each phase's rules, named by the module that holds them (imported when the phase first
#: runs, so listing or documenting the plugin imports none), in the order they run.
rules = Rules(
    # --model-parallel-size is retired; --hybrid-context-parallel has a new name
    normalize=(f"{__name__}.sizes:NORMALIZE", f"{__name__}.comm:NORMALIZE"),
    derive=(f"{__name__}.sizes:DERIVE", f"{__name__}.pipeline:DERIVE",
            f"{__name__}.comm:DERIVE", f"{__name__}.ddp:DERIVE"),
    validate=(f"{__name__}.sizes:VALIDATE", f"{__name__}.pipeline:VALIDATE",
              f"{__name__}.comm:VALIDATE", f"{__name__}.ddp:VALIDATE"),
)

megaplug_plugin = PluginInfo(
    name="parallel",
    description="Tensor, pipeline, context and data parallelism; DDP and process groups.",
    options=f"{__name__}.options:ParallelOptions",
    rules=rules,
)
