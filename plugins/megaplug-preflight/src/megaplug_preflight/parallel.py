"""Model parallelism as the model configuration sees it: sequence parallelism, per-layer
context-parallel communication, symmetric all-reduce. (GTP weight shards are checked by the
``gtp`` plugin, as Megatron's validate_args does.)"""

from __future__ import annotations

from megaplug import Draft

from ._report import reject, shown, te_shortfall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

SYMMETRIC_AR_MIN_TORCH = "2.7.0a0"
SYMMETRIC_AR_MIN_TE = "2.3.0"


def sequence_parallel_needs_tensor_parallel(config: Draft) -> None:
    if config.get("sequence_parallel") and config.get("tensor_model_parallel_size", 1) <= 1:
        reject(config, "--sequence-parallel needs tensor parallelism",
               flags=("sequence_parallel", "tensor_model_parallel_size"),
               hint="drop --sequence-parallel, or raise --tensor-model-parallel-size")


def per_layer_cp_comm_types_cover_the_layers(config: Draft) -> None:
    """One context-parallel communication type per layer, when several are given."""
    kinds = config.get("cp_comm_type")
    if config.get("context_parallel_size", 1) <= 1 or not isinstance(kinds, list) or \
            len(kinds) == 1:
        return
    num_layers = config.get("num_layers")
    if len(kinds) != num_layers:
        reject(config, f"--cp-comm-type lists {len(kinds)} types, but the model has "
                       f"{shown(config, 'num_layers', num_layers)}",
               flags=("cp_comm_type", "num_layers"),
               hint="give one type for all layers, or one per layer")


def symmetric_all_reduce_versions(config: Draft) -> None:
    if config.get("symmetric_ar_type") is None:
        return
    torch_version = config.env.package_version("torch")
    if torch_version is not None and not config.env.version_at_least("torch",
                                                                      SYMMETRIC_AR_MIN_TORCH):
        reject(config, f"--symmetric-ar-type needs torch >= 2.7, found {torch_version}",
               flags=("symmetric_ar_type",), hint="upgrade torch")
    problem = te_shortfall(config, SYMMETRIC_AR_MIN_TE)
    if problem:
        reject(config, f"--symmetric-ar-type {problem}",
               flags=("symmetric_ar_type",), hint="upgrade Transformer Engine")


CHECKS: tuple[Check, ...] = (
    sequence_parallel_needs_tensor_parallel,
    per_layer_cp_comm_types_cover_the_layers,
    symmetric_all_reduce_versions,
)
