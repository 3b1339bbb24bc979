"""Batch-invariant mode: the FlashAttention kernels, dtypes and MoE paths that give
bitwise-identical results whatever the batch composition."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

MODE = "batch_invariant_mode"
#: The package providing the bf16 grouped GEMMs some batch-invariant MoE backends use.
DEEPGEMM = "deep_gemm"


def _on(config: Draft) -> bool:
    return bool(config.get(MODE))


#: How a parameter dtype other than BF16 came about, in the flags the user wrote.
_PRECISIONS = {"float32": "FP32 (neither --bf16 nor --fp16)", "float16": "FP16 (--fp16)"}


def batch_invariant_attention(config: Draft) -> None:
    """BF16 parameters, FlashAttention 3 or 4, no context parallelism, no attention dropout."""
    if not _on(config):
        return
    dtype = str(config.get("params_dtype")).removeprefix("torch.")
    if dtype != "bfloat16":
        got = _PRECISIONS.get(dtype, dtype)
        reject(config, f"--batch-invariant-mode supports BF16 parameters only, got {got}",
               flags=(MODE, "bf16"), hint="add --bf16")
    backend = view.name_of(config.get("attention_backend"))
    if backend != "flash":
        reject(config, f"--batch-invariant-mode needs --attention-backend flash, got {backend}",
               flags=(MODE, "attention_backend"), hint="use --attention-backend flash")
    version = config.get("flash_attention_version")
    if version not in (3, 4):
        reject(config, f"--batch-invariant-mode needs --flash-attention-version 3 or 4, got "
                       f"{version}",
               flags=(MODE, "flash_attention_version"), hint="add --flash-attention-version 3")
    if config.get("context_parallel_size", 1) != 1:
        reject(config, f"--batch-invariant-mode does not support context parallelism "
                       f"({shown(config, 'context_parallel_size')})",
               flags=(MODE, "context_parallel_size"), hint="use --context-parallel-size 1")
    if (config.get("attention_dropout") or 0.0) != 0.0:
        reject(config, "--batch-invariant-mode does not support attention dropout",
               flags=(MODE, "attention_dropout"), hint="use --attention-dropout 0")


def batch_invariant_moe(config: Draft) -> None:
    """Batch-invariant MoE: all-to-all dispatch, bf16, unfused and unpadded permutation."""
    if not _on(config) or (view.experts(config) or 0) <= 0:
        return
    optimized = config.get("transformer_impl") == "inference_optimized"
    dispatcher = config.get("moe_token_dispatcher_type", "allgather")
    if not optimized and dispatcher != "alltoall":
        reject(config, f"batch-invariant MoE training needs --moe-token-dispatcher-type "
                       f"alltoall, got {dispatcher}",
               flags=(MODE, "moe_token_dispatcher_type"),
               hint="use --moe-token-dispatcher-type alltoall")
    backend = config.get("batch_invariant_backend", "te_native")
    grouped = view.name_of(config.get("inference_grouped_gemm_backend", "vllm"))
    needs_deepgemm = backend in ("deepgemm", "triton") or (optimized and grouped == "torch")
    if needs_deepgemm and config.env.package_version(DEEPGEMM) is None:
        reject(config, "batch-invariant MoE with this backend needs DeepGEMM's bf16 grouped "
                       "GEMMs (deep_gemm), not installed",
               flags=(MODE, "batch_invariant_backend"),
               hint="install deep_gemm, or use --batch-invariant-backend te_native")
    if view.fp8_on(config) or view.fp4_on(config):
        reject(config, "batch-invariant MoE is bf16-only; FP8 / FP4 are on",
               flags=(MODE, "fp8", "fp4"), hint="drop --fp8-format / --fp4-format")
    fused = [d for d in ("moe_permute_fusion", "moe_permute_fusion_into_hybridep")
             if config.get(d)]
    if fused:
        reject(config, f"batch-invariant MoE needs the unfused permutation, but "
                       f"{' and '.join(config.spelling(d) for d in fused)} fuse it",
               flags=(MODE, *fused), hint="drop the permute-fusion flags")
    padded = [d for d in ("moe_pad_expert_input_to_capacity",
                          "moe_pad_experts_for_cuda_graph_inference") if config.get(d)]
    if padded:
        reject(config, f"batch-invariant MoE supports dropless routing only, but "
                       f"{' and '.join(config.spelling(d) for d in padded)} pad experts",
               flags=(MODE, *padded), hint="drop the padding flags")


CHECKS: tuple[Check, ...] = (
    batch_invariant_attention,
    batch_invariant_moe,
)
