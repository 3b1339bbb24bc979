"""Derivations and checks that concern both FSDP implementations."""

from __future__ import annotations

from typing import Any

from megaplug import Draft, TorchDType

from .environment import BLACKWELL, device_arch

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
    """Replace the dtype names of the Megatron-FSDP dtype flags with torch dtypes."""
    for dest in DTYPE_FLAGS:
        value = config[dest]
        mapped = to_torch_dtype(value)
        if mapped != value or type(mapped) is not type(value):
            config.set(dest, mapped, inputs=(dest,), reason="dtype name to torch dtype")


def derive_stream_priorities(config: Draft) -> None:
    """FSDP's data-parallel collectives get high-priority streams (Megatron-FSDP: Blackwell+)."""
    if "high_priority_stream_groups" not in config:
        return
    # Megatron's condition reads "fsdp2 or (megatron-fsdp and Blackwell)".
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
    """torch_dcp is tested with FSDP2 only; fsdp_dtensor with Megatron-FSDP only."""
    ckpt_format = config.get("ckpt_format")
    if ckpt_format == "torch_dcp":
        _check_torch_dcp(config)
    elif ckpt_format == "fsdp_dtensor" and not config.use_megatron_fsdp:
        config.error("--ckpt-format fsdp_dtensor is tested only with Megatron-FSDP",
                     flags=("ckpt_format", "use_megatron_fsdp"),
                     hint="add --use-megatron-fsdp, or choose --ckpt-format torch_dist")


def _check_torch_dcp(config: Draft) -> None:
    if not config.use_torch_fsdp2:
        config.error("--ckpt-format torch_dcp is tested only with --use-torch-fsdp2",
                     flags=("ckpt_format", "use_torch_fsdp2"),
                     hint="add --use-torch-fsdp2, or choose --ckpt-format torch_dist")
    for dest, kind in (("tensor_model_parallel_size", "tensor"),
                       ("pipeline_model_parallel_size", "pipeline")):
        size = config.get(dest, 1)
        if size > 1:
            config.error(f"--ckpt-format torch_dcp is not tested with {kind} parallelism "
                         f"({config.spelling(dest)} {size})", flags=("ckpt_format", dest),
                         hint=f"set {config.spelling(dest)} 1, or choose --ckpt-format "
                              "torch_dist")


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


def warn_model_parallel_connections(config: Draft) -> None:
    """Before Blackwell, TP/CP want one CUDA connection and FSDP wants several."""
    tp = config.get("tensor_model_parallel_size", 1)
    cp = config.get("context_parallel_size", 1)
    if (tp > 1 or cp > 1) and device_arch(config) < BLACKWELL:
        name = "Torch-FSDP2" if config.use_torch_fsdp2 else "Megatron-FSDP"
        config.warn(f"{name} with tensor or context parallelism: these prefer "
                    "CUDA_DEVICE_MAX_CONNECTIONS=1 while FSDP prefers more connections, so one "
                    "of them will run below its best speed",
                    flags=("use_torch_fsdp2" if config.use_torch_fsdp2 else "use_megatron_fsdp",
                           "tensor_model_parallel_size", "context_parallel_size"))


def using_fsdp(config: Draft) -> bool:
    """Whether either FSDP implementation is selected."""
    return bool(config.use_torch_fsdp2 or config.use_megatron_fsdp)
