"""Inference engine settings: pipelined batching and Mamba state dtypes."""

from __future__ import annotations


from megaplug import Draft, TorchDType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "uint8"}
STATE_DTYPE_FLAGS = ("mamba_inference_conv_states_dtype", "mamba_inference_ssm_states_dtype")


def to_torch_dtype(value: Any) -> Any:
    """'bf16' -> torch.bfloat16; dtypes and None stay as they are."""
    if value is None or isinstance(value, TorchDType):
        return value
    text = str(value)
    return TorchDType(_DTYPES.get(text, text))


def derive_state_dtypes(config: Draft) -> None:
    """Replace the Mamba state dtype names with torch dtypes."""
    for dest in STATE_DTYPE_FLAGS:
        value = config[dest]
        if isinstance(value, str):
            config.set(dest, to_torch_dtype(value), inputs=(dest,),
                       reason="dtype name to torch dtype")


def check_batch_split_threshold(config: Draft) -> None:
    """Splitting batches for pipelined inference needs pipelines and no CUDA graphs."""
    threshold = config.inference_batch_times_seqlen_threshold
    if threshold <= -1:
        return
    flag = "inference_batch_times_seqlen_threshold"
    pp = config.get("pipeline_model_parallel_size", 1)
    if pp <= 1:
        config.error(f"--inference-batch-times-seqlen-threshold {threshold} needs pipeline "
                     f"parallelism (--pipeline-model-parallel-size {pp})",
                     flags=(flag, "pipeline_model_parallel_size"),
                     hint="set --pipeline-model-parallel-size above 1, or the threshold to -1")
    impl = config.get("cuda_graph_impl", "none")
    if impl != "none":
        config.error(f"--inference-batch-times-seqlen-threshold {threshold} (pipelined "
                     f"micro-batched inference) cannot be used with --cuda-graph-impl {impl}",
                     flags=(flag, "cuda_graph_impl"),
                     hint="use --cuda-graph-impl none, or set the threshold to -1")


def check_flashinfer_sampling_installed(config: Draft) -> None:
    """Megatron 0.18 imports flashinfer when it is the sampling backend, and refuses a job
    without it (0.19 dropped the import; the sampler finds out at run time)."""
    backend = "inference_dynamic_batching_sampling_backend"
    env = config.env
    if config.get(backend) != "flashinfer" or not env.megatron.at_least("0.18.0") \
            or env.megatron.at_least("0.19.0"):
        return
    problem = env.requirement_problem("flashinfer")
    if problem:
        config.error(f"{config.spelling(backend)} flashinfer {problem}", flags=(backend,),
                     hint=f"install flashinfer, or pass {config.spelling(backend)} torch")


#: The first Megatron release line whose validation no longer asks dynamic batching for a
#: KV-cache buffer size and 256-token blocks (chunks up to 0.14; and a guaranteed buffer
#: fraction up to 0.15).
UNCHECKED_BUFFER_RELEASE = "0.18.0"


def check_early_dynamic_batching_sizes(config: Draft) -> None:
    """Dynamic batching needs a buffer size and 256-token blocks (up to 0.17).

    Megatron up to 0.17: dynamic batching needs a buffer size and a block (0.13, 0.14:
    chunk) size that is a multiple of 256; up to 0.15 a guaranteed buffer fraction too."""
    env = config.env
    if not config.inference_dynamic_batching \
            or env.megatron.at_least(UNCHECKED_BUFFER_RELEASE):
        return
    line = env.release_line("megatron_core")
    for name in ("inference_dynamic_batching_buffer_size_gb",
                 "inference_dynamic_batching_buffer_guaranteed_fraction"):
        if name in config and config[name] is None:
            config.error(f"--inference-dynamic-batching needs {config.spelling(name)} in "
                         f"Megatron {line}", flags=("inference_dynamic_batching", name),
                         hint=f"set {config.spelling(name)}")
    size = "inference_dynamic_batching_chunk_size" if env.megatron.before("0.15.0") \
        else "inference_dynamic_batching_block_size"
    if config[size] % 256:
        unit = "block" if size.endswith("block_size") else "chunk"
        config.error(f"{config.spelling(size)} {config[size]} must be a multiple of 256 in "
                     f"Megatron {line}", flags=(size,),
                     hint=f"use a {unit} size such as 256 or 512")


def check_line_iteration_graphs(config: Draft) -> None:
    """Whole-iteration graphs: NaN check off in training, no FP8 in inference (0.15, 0.16).

    Megatron 0.15 and 0.16 check local whole-iteration CUDA graphs (``--cuda-graph-scope
    full_iteration``) by what runs: training needs --no-check-for-nan-in-loss-and-grad,
    dynamic-batching inference refuses FP8. (0.14 and 0.17 check the first alone: the
    training plugin's ``cuda_graphs.check_line_full_iteration_scope``.)"""
    if not config.env.megatron.between("0.15.0", "0.16.1") \
            or config.get("cuda_graph_impl") != "local":
        return
    line = config.env.release_line("megatron_core")
    scope = config.get("cuda_graph_scope")
    if not (scope == "full_iteration" or (isinstance(scope, list) and any(
            getattr(item, "name", item) == "full_iteration" for item in scope))):
        return
    if not config.inference_dynamic_batching:
        if _nan_check_before_fake_process_group(config):
            config.error(f"--cuda-graph-scope full_iteration needs "
                         f"--no-check-for-nan-in-loss-and-grad in Megatron {line}",
                         flags=("cuda_graph_scope", "check_for_nan_in_loss_and_grad"),
                         hint="add --no-check-for-nan-in-loss-and-grad, or run dynamic-batching "
                              "inference")
    elif config.get("fp8") is not None:
        config.error(f"FP8 is not supported with dynamic batching and full_iteration CUDA "
                     f"graphs in Megatron {line}",
                     flags=("fp8", "inference_dynamic_batching", "cuda_graph_scope"),
                     hint="drop --fp8-format, or capture less than the whole iteration")


def _nan_check_before_fake_process_group(config: Draft) -> bool:
    """Whether the NaN check was on before a fake process group turned it off.

    The NaN check as Megatron 0.16 reads it here: before a fake process group turns it
    off (0.15 has no fake process group)."""
    if not config.get("fake_process_group"):
        return bool(config.get("check_for_nan_in_loss_and_grad", True))
    unscaled_fp16 = config.get("fp16") and not config.get("loss_scale")
    return bool(config.given_value("check_for_nan_in_loss_and_grad", True)) and not unscaled_fp16


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_state_dtypes,)
CHECKS: tuple[Callable[[Draft], None], ...] = (check_batch_split_threshold,
                                               check_early_dynamic_batching_sizes,
                                               check_line_iteration_graphs,
                                               check_flashinfer_sampling_installed)
