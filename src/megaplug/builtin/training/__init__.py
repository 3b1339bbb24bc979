"""The training plugin: batch sizes, training length, schedules, optimizers, recomputation,
CUDA graphs, profiling, the rerun engine and deterministic mode.

Reads the parallel layout (``data_parallel_size``) derived by the ``parallel`` plugin, and
a few other plugins' values through ``config.get`` so it works whether or not they are
installed.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import batch, cuda_graphs, kernels, optimizer, recompute, schedule
from .enums import CudaGraphModule

__all__ = ["CudaGraphModule", "TrainingOptions", "megaplug_plugin"]

rules = Rules(
    # retired flags become their replacements, and CUDA graph modules become enum members
    normalize=(optimizer.normalize_retired_batch_size, optimizer.normalize_retired_warmup,
               optimizer.normalize_weight_decay_cond_type,
               recompute.normalize_checkpoint_activations,
               recompute.normalize_recompute_activations,
               cuda_graphs.normalize_retired_switches, cuda_graphs.normalize_retired_scope_flag,
               cuda_graphs.normalize_module_list),
    derive=(batch.derive_global_batch_size, batch.derive_eval_batch_sizes,
            kernels.derive_nan_check, kernels.derive_dataloader_type,
            kernels.derive_persist_layer_norm, schedule.derive_weight_decay_range,
            kernels.derive_bias_gelu_fusion, kernels.derive_rope_fusion,
            optimizer.derive_layer_wise_distribution, optimizer.derive_frozen_training,
            recompute.derive_cpu_offloading, cuda_graphs.derive_te_rng_tracker),
    validate=(batch.check_micro_batch_size, batch.check_step_schedule_excludes_global_batch,
              batch.check_global_batch_size, batch.check_eval_batch_divisibility,
              schedule.check_iteration_based, schedule.check_sample_based,
              schedule.check_learning_rate_floor, schedule.check_weight_decay_range,
              schedule.check_scheduler_source, recompute.check_distributed_saved_activations,
              recompute.check_selective_has_no_method, recompute.check_fine_grained_offloading,
              kernels.check_te_cross_entropy, kernels.check_deterministic_mode,
              optimizer.warn_dist_muon, optimizer.check_emerging_optimizer,
              cuda_graphs.check_full_iteration_has_no_modules,
              cuda_graphs.check_allocator_settings),
)

megaplug_plugin = PluginInfo(
    name="training",
    description="Batch sizes, training length, learning-rate schedules, optimizers, "
                "recomputation, CUDA graphs, profiling and deterministic mode.",
    after=("parallel",),
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare every training setting."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import TrainingOptions

    flags.add_options(TrainingOptions)


def __getattr__(name: str) -> object:
    if name == "TrainingOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
