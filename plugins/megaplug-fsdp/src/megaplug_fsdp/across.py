"""What FSDP changes in other plugins' rules: checks that involve both FSDP and a built-in
setting, and the built-in rules FSDP takes over while it is in use.

The built-in plugins know nothing of FSDP. Where one of their rules would say the wrong
thing with FSDP on (sharded parameters come from FSDP, not the distributed optimizer; FSDP
wants several CUDA connections), ``megaplug_plugin``'s rules supersede it while FSDP is in
use, and the rules here say what applies instead.
"""

from __future__ import annotations


from megaplug import Draft

from . import uses_fsdp
from .environment import BLACKWELL, device_arch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

_CLASSIC_OPTIMIZERS = ("adam", "sgd")


def _implementation(config: Draft) -> str:
    return "Torch-FSDP2" if config.use_torch_fsdp2 else "Megatron-FSDP"


def warn_device_connections_with_model_parallelism(config: Draft) -> None:
    """Before Blackwell, TP/CP kernels want CUDA_DEVICE_MAX_CONNECTIONS=1 and FSDP wants
    more: with both, Megatron only warns (this replaces the parallel plugin's error)."""
    if not uses_fsdp(config) or device_arch(config) >= BLACKWELL or \
            config.env.capability() is None:
        return
    if config.get("tensor_model_parallel_size", 1) <= 1 and \
            config.get("context_parallel_size", 1) <= 1:
        return
    fsdp = _implementation(config)
    config.warn(f"tensor or context parallelism with {fsdp} wants opposite "
                f"CUDA_DEVICE_MAX_CONNECTIONS settings (1 for TP/CP, more for {fsdp}); "
                "performance may suffer",
                flags=("tensor_model_parallel_size", "context_parallel_size"))


def check_torch_dcp_format(config: Draft) -> None:
    """The ``torch_dcp`` checkpoint format is only tested with Torch FSDP2."""
    if config.get("ckpt_format") == "torch_dcp" and not config.use_torch_fsdp2:
        config.error("--ckpt-format torch_dcp is only supported with --use-torch-fsdp2",
                     flags=("ckpt_format",),
                     hint="add --use-torch-fsdp2, or use --ckpt-format torch_dist")


def check_dynamic_context_parallel(config: Draft) -> None:
    """Dynamic context parallelism runs on Megatron DDP, not Megatron-FSDP."""
    if config.use_megatron_fsdp and config.get("dynamic_context_parallel"):
        config.error("--dynamic-context-parallel does not work with Megatron-FSDP",
                     flags=("dynamic_context_parallel", "use_megatron_fsdp"),
                     hint="drop one of them")


def check_classic_optimizer(config: Draft) -> None:
    """Optimizers beyond Adam and SGD do not run under FSDP yet."""
    optimizer = config.get("optimizer", "adam")
    if optimizer in _CLASSIC_OPTIMIZERS:
        return
    for dest in ("use_torch_fsdp2", "use_megatron_fsdp"):
        if config[dest]:
            config.error(f"--optimizer {optimizer} does not support {config.spelling(dest)} yet",
                         flags=("optimizer", dest),
                         hint=f"use --optimizer adam or sgd, or drop {config.spelling(dest)}")


CHECKS: tuple[Callable[[Draft], None], ...] = (
    check_torch_dcp_format,
    check_dynamic_context_parallel,
    check_classic_optimizer,
    warn_device_connections_with_model_parallelism,
)
