"""Derivations and checks that concern both FSDP implementations."""

from __future__ import annotations


from megaplug import Draft, TorchDType

from .environment import BLACKWELL, device_arch

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "uint8"}
DTYPE_FLAGS = (
    "megatron_fsdp_main_params_dtype",
    "megatron_fsdp_main_grads_dtype",
    "megatron_fsdp_grad_comm_dtype",
)


def to_torch_dtype(value: Any) -> TorchDType | None:
    """'bf16' -> torch.bfloat16; 'auto' (and None) -> None; a dtype stays as it is."""
    if value is None or value == "auto":
        return None
    if isinstance(value, TorchDType):
        return value
    text = str(value)
    return TorchDType(_DTYPES.get(text, text))


def derive_dtypes(config: Draft) -> None:
    """Replace the dtype names of the Megatron-FSDP dtype flags with torch dtypes.

    Megatron 0.17 and 0.18 communicate Megatron-FSDP's gradients in bf16 with
    --grad-reduce-in-bf16."""
    for dest in DTYPE_FLAGS:
        value = config[dest]
        if isinstance(value, str):
            config.set(dest, to_torch_dtype(value), inputs=(dest,),
                       reason="dtype name to torch dtype")
    if config.env.megatron.between("0.17.0", "0.18.2") \
            and config.get("grad_reduce_in_bf16"):
        config.set("megatron_fsdp_grad_comm_dtype", TorchDType("bfloat16"),
                   inputs=("grad_reduce_in_bf16",),
                   reason="--grad-reduce-in-bf16 reduces gradients in bf16")


def derive_stream_priorities(config: Draft) -> None:
    """FSDP's data-parallel collectives get high-priority streams (Megatron-FSDP: Blackwell+)."""
    if "high_priority_stream_groups" not in config:
        return
    # Megatron's condition reads "fsdp2 or (megatron-fsdp and Blackwell)". Appending here,
    # before gtp adds its own groups, keeps Megatron's order of the list.
    if not (config.use_torch_fsdp2 or (config.use_megatron_fsdp
                                       and device_arch(config) >= BLACKWELL)):
        return
    groups = list(config.high_priority_stream_groups or [])
    wanted = ["dp_cp"]
    if config.get("expert_model_parallel_size", 1) > 1:
        wanted.append("ep_dp")
    added = [group for group in wanted if group not in groups]
    if added:
        config.set("high_priority_stream_groups", groups + added,
                   inputs=("use_torch_fsdp2", "use_megatron_fsdp", "expert_model_parallel_size"),
                   reason="FSDP data-parallel collectives run on high-priority streams")


def check_checkpoint_format(config: Draft) -> None:
    """fsdp_dtensor checkpoints are tested with Megatron-FSDP only."""
    if config.get("ckpt_format") == "fsdp_dtensor" and not config.use_megatron_fsdp:
        config.error("--ckpt-format fsdp_dtensor is tested only with Megatron-FSDP",
                     flags=("ckpt_format", "use_megatron_fsdp"),
                     hint="add --use-megatron-fsdp, or choose --ckpt-format torch_dist")


def check_manual_registration(config: Draft) -> None:
    """Manual NCCL buffer registration exists only in Megatron-FSDP with NCCL user buffers."""
    if not config.fsdp_manual_registration:
        return
    if not config.use_megatron_fsdp:
        config.error("--fsdp-manual-registration works only with --use-megatron-fsdp",
                     flags=("fsdp_manual_registration", "use_megatron_fsdp"),
                     hint="add --use-megatron-fsdp, or drop --fsdp-manual-registration")
    if not config.get("nccl_ub", False):
        config.error("--fsdp-manual-registration works only with --use-nccl-ub",
                     flags=("fsdp_manual_registration", "nccl_ub"),
                     hint="add --use-nccl-ub, or drop --fsdp-manual-registration")


# derive_dtypes runs after Torch FSDP2's derivation, derive_stream_priorities after
# Megatron-FSDP's: two groups, so that __init__ can keep that order
DTYPE_DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_dtypes,)
STREAM_DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_stream_priorities,)
CHECKS: tuple[Callable[[Draft], None], ...] = (check_manual_registration, check_checkpoint_format)
