"""Manifold hyper-connections (mHC), and what they exclude (multi-token prediction, ...).

``--mtp-hsm`` with fewer than two MTP layers is not checked here: Megatron's validate_args
turns hidden-state mixing off for it, so the model configuration never sees it.
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

MHC = "enable_mhc_connections"


def mhc_recompute(config: Draft) -> None:
    """Recomputing hyper-connections needs them, apart from MLP recompute and offloading."""
    if view.recompute_granularity_final(config) != "selective" or \
            "mhc" not in view.recompute_modules_final(config):
        return
    if not config.get(MHC):
        reject(config, "--recompute-modules mhc needs --enable-mhc-connections",
               flags=("recompute_modules", MHC), hint="add --enable-mhc-connections")
    if "mlp" in view.recompute_modules_final(config):
        reject(config, "--recompute-modules mhc and mlp cannot be used together",
               flags=("recompute_modules",), hint="keep one of the two")
    every = config.get("mhc_recompute_layer_num")
    if every is not None and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        reject(config, f"{shown(config, 'mhc_recompute_layer_num')} must be a positive integer",
               flags=("mhc_recompute_layer_num",), hint="use 1 or more")
    if config.get("fine_grained_activation_offloading"):
        reject(config, "--recompute-modules mhc does not work with "
                       "--fine-grained-activation-offloading yet",
               flags=("recompute_modules", "fine_grained_activation_offloading"),
               hint="disable one of the two")


def mhc_model_limits(config: Draft) -> None:
    """Hyper-connections exclude MTP, full recompute, fused inference TP, pipeline stages
    and fp32 residuals, and need a working Sinkhorn projection."""
    if not config.get(MHC):
        return
    excluded = (
        ("mtp_num_layers", config.get("mtp_num_layers") is not None,
         "multi-token prediction", "drop --mtp-num-layers"),
        ("recompute_granularity", view.recompute_granularity_final(config) == "full",
         "full recomputation", "use --recompute-granularity selective --recompute-modules mhc"),
        ("inference_fuse_tp_communication", bool(config.get("inference_fuse_tp_communication")),
         "--inference-fuse-tp-communication", "drop --inference-fuse-tp-communication"),
        ("pipeline_model_parallel_size", config.get("pipeline_model_parallel_size", 1) > 1,
         "pipeline parallelism", "use --pipeline-model-parallel-size 1"),
        ("fp32_residual_connection", bool(config.get("fp32_residual_connection")),
         "--fp32-residual-connection", "drop --fp32-residual-connection"),
    )
    for dest, present, what, hint in excluded:
        if present:
            reject(config, f"--enable-mhc-connections does not work with {what}",
                   flags=(MHC, dest), hint=hint)
    iterations = config.get("mhc_sinkhorn_iterations", 20)
    if iterations is not None and iterations < 1:
        reject(config, f"{shown(config, 'mhc_sinkhorn_iterations')} must be 1 or more",
               flags=("mhc_sinkhorn_iterations",), hint="use at least one Sinkhorn iteration")
    gating = config.get("mhc_init_gating_factor", 0.01)
    if gating is not None and gating < 0:
        reject(config, f"{shown(config, 'mhc_init_gating_factor')} must not be negative",
               flags=("mhc_init_gating_factor",), hint="use 0 or more")


CHECKS: tuple[Check, ...] = (
    mhc_recompute,
    mhc_model_limits,
)
