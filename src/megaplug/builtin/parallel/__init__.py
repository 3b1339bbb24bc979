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

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import comm, ddp, pipeline, sizes

rules = Rules(
    # --model-parallel-size is retired; --hybrid-context-parallel has a new name
    normalize=(sizes.retire_model_parallel_size, comm.normalize_dynamic_context_parallel),
    derive=(sizes.derive_parallel_sizes, pipeline.derive_virtual_pipeline,
            pipeline.derive_non_interleaved_schedule, comm.derive_sequence_parallel,
            comm.derive_dynamic_context_parallel_scheduler, ddp.derive_fake_process_group),
    validate=(sizes.check_process_identity, sizes.check_positive_sizes,
              sizes.check_world_size_divisible, sizes.check_hierarchical_context_parallel,
              pipeline.check_uneven_stage_sizes, pipeline.check_interleaved_schedule,
              comm.check_tp_comm_overlap, comm.check_cp_comm_type,
              comm.check_dynamic_context_parallel, comm.check_packed_sequence_buffer,
              comm.check_cuda_device_max_connections, comm.check_deterministic_parallelism,
              ddp.check_overlap_param_gather_sharding, ddp.check_overlap_param_gather_reduce,
              ddp.check_overlap_param_gather_with_optimizer_step,
              ddp.check_distributed_optimizer_instances, ddp.check_gloo_requirements,
              ddp.check_delay_wgrad_compute),
)

megaplug_plugin = PluginInfo(
    name="parallel",
    description="Tensor, pipeline, context and data parallelism; DDP and process groups.",
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the parallelism settings."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import ParallelOptions

    flags.add_options(ParallelOptions)
