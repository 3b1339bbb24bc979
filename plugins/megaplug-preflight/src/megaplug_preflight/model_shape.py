"""The model's shape and initialization as the configuration builds them."""

from __future__ import annotations

from megaplug import Draft

from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check


def layer_count_positive(config: Draft) -> None:
    """Output-layer initialization scales by the layer count, which must be positive."""
    layers = config.get("num_layers")
    if layers is not None and layers <= 0:
        reject(config, f"{shown(config, 'num_layers')} must be at least 1",
               flags=("num_layers",), hint="give the model at least one layer")


def xavier_initialization_unsupported(config: Draft) -> None:
    """Megatron passes Xavier initialization as a ``scaled_init_method`` argument, which its
    model configuration no longer accepts (a TypeError on every rank)."""
    if config.get("init_method_xavier_uniform"):
        reject(config, "--init-method-xavier-uniform is not accepted by Megatron's model "
                       "configuration (it passes scaled_init_method, which TransformerConfig "
                       "does not have)",
               flags=("init_method_xavier_uniform",),
               hint="drop --init-method-xavier-uniform (use --init-method-std)")


def expert_tensor_parallel_size_positive(config: Draft) -> None:
    """Expert weights are sharded over the expert tensor-parallel ranks: at least one."""
    if config.get("expert_tensor_parallel_size") != 0:
        return
    if config.source("expert_tensor_parallel_size").source == "derived":
        return  # defaulted from --tensor-model-parallel-size 0, which validation rejects
    reject(config, "--expert-tensor-parallel-size 0 leaves no rank to hold expert weights",
           flags=("expert_tensor_parallel_size",),
           hint="use 1 or more (it defaults to --tensor-model-parallel-size)")


CHECKS: tuple[Check, ...] = (
    layer_count_positive,
    xavier_initialization_unsupported,
    expert_tensor_parallel_size_positive,
)
