"""Parallelism: tensor, pipeline (incl. virtual stages), context and data parallelism,
process-group set-up, DDP and the distributed optimizer.

Derives ``data_parallel_size``, ``transformer_pipeline_model_parallel_size`` and
``virtual_pipeline_model_parallel_size``; reads ``RANK`` and ``WORLD_SIZE``. Feature plugins
that change the rank layout (GTP folds its sequence shards into the context-parallel size and
declares ``gtp_weight_remat_size``) run before this one; the experimental plugin's hybrid
layer pattern may set the virtual pipeline size first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from . import comm, ddp, pipeline, sizes
from .options import ParallelOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="parallel",
    description="Tensor, pipeline, context and data parallelism; DDP and process groups.",
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the parallelism settings."""
    flags.add_options(ParallelOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Retire ``--model-parallel-size``; map ``--hybrid-context-parallel`` to its new name."""
    sizes.retire_model_parallel_size(config)
    comm.normalize_dynamic_context_parallel(config)


@hookimpl
def derive(config: Draft) -> None:
    """Derive the parallel sizes, the virtual pipeline size and their knock-on settings."""
    sizes.derive_parallel_sizes(config)
    pipeline.derive_virtual_pipeline(config)
    pipeline.derive_non_interleaved_schedule(config)
    comm.derive_sequence_parallel(config)
    comm.derive_dynamic_context_parallel_scheduler(config)
    comm.derive_high_priority_stream_groups(config)
    ddp.derive_fake_process_group(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report impossible parallel layouts and unsupported combinations."""
    for check in (
        sizes.check_process_identity,
        sizes.check_positive_sizes,
        sizes.check_world_size_divisible,
        sizes.check_hierarchical_context_parallel,
        pipeline.check_uneven_stage_sizes,
        pipeline.check_interleaved_schedule,
        comm.check_tp_comm_overlap,
        comm.check_cp_comm_type,
        comm.check_dynamic_context_parallel,
        comm.check_packed_sequence_buffer,
        comm.check_cuda_device_max_connections,
        comm.check_deterministic_parallelism,
        ddp.check_overlap_param_gather,
        ddp.check_overlap_param_gather_with_optimizer_step,
        ddp.check_distributed_optimizer_instances,
        ddp.check_gloo_requirements,
        ddp.check_fake_process_group,
        ddp.check_delay_wgrad_compute,
    ):
        check(config)
