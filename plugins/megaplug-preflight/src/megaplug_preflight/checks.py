"""Every pre-flight check, by family: the table the plugin's validate hook runs.

Each check is a small function that reads resolved values and reports what Megatron's
model configuration (``TransformerConfig`` / ``ModelParallelConfig.__post_init__`` and
``core_transformer_config_from_args``) would raise for them. Checks that Megatron's
``validate_args`` already makes are left to the plugins that reproduce it.
"""

from __future__ import annotations

from . import (
    attention,
    batch_invariant,
    cuda_graphs,
    first_step,
    fusions,
    hyper_connections,
    inference,
    model_build,
    model_shape,
    moe,
    offloading,
    overlap,
    parallel,
    pipeline,
    precision,
    recompute,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

FAMILIES: dict[str, tuple[Check, ...]] = {
    "model shape": model_shape.CHECKS,
    "attention": attention.CHECKS,
    "moe": moe.CHECKS,
    "recompute": recompute.CHECKS,
    "precision": precision.CHECKS,
    "expert-parallel overlap": overlap.CHECKS,
    "fusions": fusions.CHECKS,
    "pipeline": pipeline.CHECKS,
    "cuda graphs": cuda_graphs.CHECKS,
    "offloading": offloading.CHECKS,
    "inference": inference.CHECKS,
    "batch invariance": batch_invariant.CHECKS,
    "parallelism": parallel.CHECKS,
    "hyper-connections": hyper_connections.CHECKS,
    "layer construction (warnings)": model_build.CHECKS,
    "first training step": first_step.CHECKS,
}

CHECKS: tuple[Check, ...] = tuple(check for family in FAMILIES.values() for check in family)
