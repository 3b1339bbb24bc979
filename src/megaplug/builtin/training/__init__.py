"""The training plugin: batch sizes, training length, schedules, optimizers, recomputation,
CUDA graphs, profiling, the rerun engine and deterministic mode.

Reads the parallel layout (``data_parallel_size``) derived by the ``parallel`` plugin, and
a few other plugins' values through ``config.get`` so it works whether or not they are
installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from . import batch, cuda_graphs, kernels, optimizer, recompute, schedule
from .enums import CudaGraphModule
from .options import TrainingOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

__all__ = ["CudaGraphModule", "TrainingOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="training",
    description="Batch sizes, training length, learning-rate schedules, optimizers, "
                "recomputation, CUDA graphs, profiling and deterministic mode.",
    after=("parallel",),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare every training setting."""
    flags.add_options(TrainingOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Retired flags become their replacements, and CUDA graph modules become enum members."""
    optimizer.normalize_retired_batch_size(config)
    optimizer.normalize_retired_warmup(config)
    optimizer.normalize_weight_decay_cond_type(config)
    recompute.normalize_checkpoint_activations(config)
    recompute.normalize_recompute_activations(config)
    cuda_graphs.normalize_retired_switches(config)
    cuda_graphs.normalize_retired_scope_flag(config)
    cuda_graphs.normalize_module_list(config)


@hookimpl
def derive(config: Draft) -> None:
    """Batch-size defaults, schedule defaults and settings implied by other settings."""
    batch.derive_global_batch_size(config)
    batch.derive_eval_batch_sizes(config)
    kernels.derive_nan_check(config)
    kernels.derive_dataloader_type(config)
    kernels.derive_persist_layer_norm(config)
    schedule.derive_weight_decay_range(config)
    kernels.derive_bias_gelu_fusion(config)
    kernels.derive_rope_fusion(config)
    optimizer.derive_layer_wise_distribution(config)
    optimizer.derive_frozen_training(config)
    recompute.derive_cpu_offloading(config)
    cuda_graphs.derive_te_rng_tracker(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report impossible combinations."""
    batch.check_micro_batch_size(config)
    batch.check_step_schedule_excludes_global_batch(config)
    batch.check_global_batch_size(config)
    batch.check_eval_batch_divisibility(config)
    schedule.check_iteration_based(config)
    schedule.check_sample_based(config)
    schedule.check_learning_rate_floor(config)
    schedule.check_weight_decay_range(config)
    schedule.check_scheduler_source(config)
    recompute.check_distributed_saved_activations(config)
    recompute.check_selective_has_no_method(config)
    recompute.check_fine_grained_offloading(config)
    kernels.check_te_cross_entropy(config)
    kernels.check_deterministic_mode(config)
    optimizer.warn_dist_muon(config)
    optimizer.check_emerging_optimizer(config)
    cuda_graphs.check_full_iteration_has_no_modules(config)
    cuda_graphs.check_allocator_settings(config)
