"""Checks that involve MoE settings and built-in ones, and the built-in rule MoE takes over.

The built-in plugins know nothing of MoE: a check about the fake process group and the
flex dispatcher, or about a CUDA-graphed router with delayed weight gradients, lives here,
and while expert-parallel communication overlaps compute this plugin takes over the
parallel plugin's CUDA_DEVICE_MAX_CONNECTIONS requirement (Megatron only advises then).
"""

from __future__ import annotations


from megaplug import Draft

from . import overlaps_expert_parallel_comm

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def warn_device_connections_with_model_parallelism(config: Draft) -> None:
    """Before Blackwell, TP/CP want CUDA_DEVICE_MAX_CONNECTIONS=1 and the EP overlap wants
    more: Megatron only advises which to favour."""
    if not overlaps_expert_parallel_comm(config):
        return
    capability = config.env.capability()
    if capability is None or capability[0] >= 10:
        return
    if config.get("tensor_model_parallel_size", 1) <= 1 and \
            config.get("context_parallel_size", 1) <= 1:
        return
    config.warn("on Hopper and older GPUs, tensor or context parallelism wants "
                "CUDA_DEVICE_MAX_CONNECTIONS=1 while --overlap-moe-expert-parallel-comm wants "
                "more; set it to 1 or 32 depending on which to favour",
                flags=("tensor_model_parallel_size", "context_parallel_size",
                       "overlap_moe_expert_parallel_comm"))


def flex_dispatcher_needs_real_communication(config: Draft) -> None:
    """The flex token dispatcher does not work over a fake process group."""
    if config.get("fake_process_group") and config.moe_token_dispatcher_type == "flex":
        config.error("--fake-process-group does not work with --moe-token-dispatcher-type flex",
                     flags=("fake_process_group", "moe_token_dispatcher_type"),
                     hint="use the alltoall or allgather dispatcher with a fake process group")


def graphed_router_with_delayed_wgrad(config: Draft) -> None:
    """From Megatron 0.17, with overlapped gradient reduction, a CUDA-graphed router whose
    shared experts do not overlap keeps the delayed weight gradient inside its graph: that
    needs Transformer Engine 2.12 and gradient accumulation fusion. (With attention graphed
    too, the parallel plugin reports the same needs for attention: once, as Megatron.)"""
    if not (config.get("delay_wgrad_compute") and config.get("overlap_grad_reduce")) \
            or config.env.megatron.before("0.17.0"):
        return
    modules = {str(getattr(m, "name", m)) for m in config.get("cuda_graph_modules") or []}
    if "moe_router" not in modules or "attn" in modules:
        return
    if config.moe_shared_expert_intermediate_size is None or config.moe_shared_expert_overlap:
        return
    what = "a CUDA-graphed router beside shared experts, with --delay-wgrad-compute,"
    flags = ("delay_wgrad_compute", "cuda_graph_modules", "moe_shared_expert_intermediate_size")
    problem = config.env.requirement_problem("transformer_engine", "2.12.0")
    if problem:
        config.error(f"{what} {problem}", flags=flags, hint="upgrade Transformer Engine to "
                     "2.12.0 or later, or add --moe-shared-expert-overlap")
    if not config.get("gradient_accumulation_fusion", True):
        config.error(f"{what} needs gradient accumulation fusion (its static buffers are what "
                     "graphs can capture)", flags=(*flags, "gradient_accumulation_fusion"),
                     hint="drop --no-gradient-accumulation-fusion")


def dense_encoder_shares_decoder_tensor_parallelism(config: Draft) -> None:
    """Megatron 0.13 (the last release with encoder parallel sizes) runs an encoder without
    its own pipeline stages on the decoder's first stage, so an explicitly dense model
    (``--num-experts 0``) needs the decoder's tensor-parallel size there."""
    encoder_tp = config.get("encoder_tensor_model_parallel_size")
    if encoder_tp is None or config.get("encoder_pipeline_model_parallel_size") != 0 \
            or config.given_value("num_experts") != 0:
        return  # not a 0.13 launch, an encoder with its own stages, or not said to be dense
    tp = config.get("tensor_model_parallel_size", 1)
    if encoder_tp != tp:
        config.error(f"--encoder-tensor-model-parallel-size {encoder_tp} must equal "
                     f"--tensor-model-parallel-size {tp}: a dense encoder without its own "
                     "pipeline stages shares the decoder's first stage",
                     flags=("encoder_tensor_model_parallel_size", "tensor_model_parallel_size",
                            "num_experts"),
                     hint=f"pass --encoder-tensor-model-parallel-size {tp}, or give the "
                          "encoder its own stages (--encoder-pipeline-model-parallel-size)")


def early_moe_limits(config: Draft) -> None:
    """Megatron before 0.16 ran MoE in fewer shapes: grouped GEMM only in bf16, expert
    parallelism not in fp16, and no custom --spec for an MoE model."""
    env = config.env
    if not env.megatron.before("0.16.0"):
        return
    line = env.release_line("megatron_core")
    if config.moe_grouped_gemm and not config.get("bf16"):
        config.error(f"--moe-grouped-gemm supports only bf16 in Megatron {line}",
                     flags=("moe_grouped_gemm", "bf16"), hint="add --bf16, or drop "
                     "--moe-grouped-gemm")
    if config.expert_model_parallel_size > 1 and config.get("fp16"):
        config.error(f"expert parallelism (--expert-model-parallel-size "
                     f"{config.expert_model_parallel_size}) does not support --fp16 in "
                     f"Megatron {line}", flags=("expert_model_parallel_size", "fp16"),
                     hint="train in bf16, or use --expert-model-parallel-size 1")
    if config.num_experts is not None and config.get("spec") is not None:
        config.error(f"--spec cannot be used with an MoE model (--num-experts) in Megatron "
                     f"{line}", flags=("spec", "num_experts"), hint="drop --spec")


CHECKS: tuple[Callable[[Draft], None], ...] = (
    early_moe_limits,
    dense_encoder_shares_decoder_tensor_parallelism,
    flex_dispatcher_needs_real_communication,
    graphed_router_with_delayed_wgrad,
    warn_device_connections_with_model_parallelism,
)
