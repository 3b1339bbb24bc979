"""Inference-only options: the inference-optimized transformer and what it excludes, and
options that only that implementation has."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

OPTIMIZED = "inference_optimized"
#: Grouped-GEMM backends of inference-optimized MoE that implement gated linear units.
GLU_GROUPED_GEMM_BACKENDS = ("torch", "vllm")


def _optimized(config: Draft) -> bool:
    return config.get("transformer_impl") == OPTIMIZED


def inference_optimized_moe(config: Draft) -> None:
    """Inference-optimized MoE layers are dropless, unpadded, fp32-routed, without expert
    tensor parallelism, and gated only with some grouped-GEMM backends."""
    if not _optimized(config) or view.experts(config) is None:
        return
    impl = shown(config, "transformer_impl")
    etp = config.get("expert_tensor_parallel_size") or 1
    if etp > 1:
        reject(config, f"{impl} MoE layers do not support expert tensor parallelism "
                       f"({shown(config, 'expert_tensor_parallel_size', etp)})",
               flags=("transformer_impl", "expert_tensor_parallel_size"),
               hint="use --expert-tensor-parallel-size 1")
    if config.get("moe_expert_capacity_factor") is not None:
        reject(config, f"{impl} MoE layers are dropless; --moe-expert-capacity-factor does not "
                       "apply",
               flags=("transformer_impl", "moe_expert_capacity_factor"),
               hint="drop --moe-expert-capacity-factor")
    if config.get("moe_router_padding_for_quantization"):
        reject(config, f"{impl} MoE layers do not pad the routing map for quantization",
               flags=("transformer_impl", "moe_router_padding_for_quantization"),
               hint="drop --moe-router-padding-for-quantization")
    if config.get("moe_router_dtype") != "fp32":
        reject(config, f"{impl} MoE needs --moe-router-dtype fp32, got "
                       f"{config.get('moe_router_dtype')}",
               flags=("transformer_impl", "moe_router_dtype"), hint="add --moe-router-dtype fp32")
    backend = view.name_of(config.get("inference_grouped_gemm_backend", "vllm"))
    if view.gated_linear_unit(config) and backend not in GLU_GROUPED_GEMM_BACKENDS:
        reject(config, f"{impl} MoE supports gated linear units (SwiGLU / GeGLU) only with "
                       f"--inference-grouped-gemm-backend torch or vllm, got {backend}",
               flags=("transformer_impl", "inference_grouped_gemm_backend", "swiglu"),
               hint="use --inference-grouped-gemm-backend torch or vllm")
    if config.get("batch_invariant_mode"):
        _batch_invariant_optimized_moe(config, impl, backend)


def _batch_invariant_optimized_moe(config: Draft, impl: str, backend: str) -> None:
    """Batch-invariant inference-optimized MoE: deterministic GEMMs and token dispatch."""
    if backend not in ("torch", "vllm"):
        reject(config, f"--batch-invariant-mode with {impl} MoE needs "
                       f"--inference-grouped-gemm-backend torch or vllm, got {backend}",
               flags=("batch_invariant_mode", "inference_grouped_gemm_backend"),
               hint="use --inference-grouped-gemm-backend torch or vllm")
    dispatcher = config.get("inference_moe_token_dispatcher_type", "nvls")
    if config.get("expert_model_parallel_size", 1) > 1 and dispatcher != "nvls":
        reject(config, f"--batch-invariant-mode with {impl} MoE and expert parallelism needs "
                       f"--inference-moe-token-dispatcher-type nvls, got {dispatcher}",
               flags=("batch_invariant_mode", "inference_moe_token_dispatcher_type"),
               hint="use --inference-moe-token-dispatcher-type nvls")


def inference_optimized_layers(config: Draft) -> None:
    """The inference-optimized layers are RMSNorm without bias, centered gamma or Kitchen."""
    if not _optimized(config):
        return
    impl = shown(config, "transformer_impl")
    normalization = config.get("normalization", "LayerNorm")
    if normalization != "RMSNorm":
        reject(config, f"{impl} needs --normalization RMSNorm, got {normalization}",
               flags=("transformer_impl", "normalization"), hint="use --normalization RMSNorm")
    if config.get("layernorm_zero_centered_gamma"):
        reject(config, f"{impl} does not support a zero-centered LayerNorm gamma",
               flags=("transformer_impl", "layernorm_zero_centered_gamma"),
               hint=f"drop {config.spelling('layernorm_zero_centered_gamma')}")
    if config.get("add_bias_linear") or config.get("add_qkv_bias"):
        reject(config, f"{impl} has no linear biases",
               flags=("transformer_impl", "add_bias_linear", "add_qkv_bias"),
               hint="add --disable-bias-linear (and drop --add-qkv-bias)")
    if config.get("kitchen_config_file") is not None or config.get(
            "kitchen_recipe_number") is not None:
        reject(config, f"{impl} does not support Kitchen quantization",
               flags=("transformer_impl", "kitchen_config_file", "kitchen_recipe_number"),
               hint="drop the Kitchen flags")


def inference_only_options(config: Draft) -> None:
    """Options that only the inference-optimized implementation has."""
    if _optimized(config):
        if config.get("inference_fuse_tp_communication") and view.experts(config) is not None:
            reject(config, "--inference-fuse-tp-communication does not support MoE models",
                   flags=("inference_fuse_tp_communication", "num_experts"),
                   hint="drop --inference-fuse-tp-communication")
        return
    impl = config.get("transformer_impl", "transformer_engine")
    for dest in ("inference_fuse_tp_communication", "inference_disable_triton_nvls_kernels"):
        if config.get(dest):
            reject(config, f"{config.spelling(dest)} needs --transformer-impl "
                           f"inference_optimized, got {impl}",
                   flags=(dest, "transformer_impl"),
                   hint=f"drop {config.spelling(dest)} (it is an inference option)")


CHECKS: tuple[Check, ...] = (
    inference_optimized_moe,
    inference_optimized_layers,
    inference_only_options,
)
