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
    if config.get(backend) != "flashinfer" or not env.line_at_least("megatron_core", "0.18") \
            or env.line_at_least("megatron_core", "0.19"):
        return
    problem = env.requirement_problem("flashinfer")
    if problem:
        config.error(f"{config.spelling(backend)} flashinfer {problem}", flags=(backend,),
                     hint=f"install flashinfer, or pass {config.spelling(backend)} torch")


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_state_dtypes,)
CHECKS: tuple[Callable[[Draft], None], ...] = (check_batch_split_threshold,
                                               check_flashinfer_sampling_installed)
