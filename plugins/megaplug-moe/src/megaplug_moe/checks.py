"""MoE checks: each a small function that reports problems and changes nothing.

Settings of other plugins are read with ``config.get`` so a check still works (and
simply does not apply) when that plugin is not installed. Checks that Megatron makes inside
another feature's block stay with that feature's plugin: FSDP2 without expert parallelism
and single grouped MoE parameters without Megatron-FSDP (``fsdp``). Checks that involve a
built-in setting are in ``across``.
"""

from __future__ import annotations

from megaplug import Draft, divisors, spoken

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def _fsdp_name(config: Draft) -> str | None:
    if config.get("use_torch_fsdp2"):
        return "--use-torch-fsdp2"
    if config.get("use_megatron_fsdp"):
        return "--use-megatron-fsdp"
    return None


def expert_parallel_needs_experts(config: Draft) -> None:
    """Expert parallelism distributes experts, so there must be some."""
    ep = config.expert_model_parallel_size
    if ep > 1 and config.num_experts is None:
        config.error(f"--expert-model-parallel-size {ep} needs an MoE model, but --num-experts "
                     "is not set (or 0)",
                     flags=("expert_model_parallel_size", "num_experts"),
                     hint="set --num-experts, or use --expert-model-parallel-size 1")


def experts_divide_over_expert_parallel_ranks(config: Draft) -> None:
    """Every expert-parallel rank holds the same number of experts."""
    n, ep = config.num_experts, config.expert_model_parallel_size
    if ep > 1 and n is not None and n % ep:
        config.error(f"--num-experts {n} is not a multiple of --expert-model-parallel-size {ep}",
                     flags=("num_experts", "expert_model_parallel_size"),
                     hint=_experts_hint(n, ep))


def _experts_hint(n: int, ep: int) -> str:
    if n < 1:  # no expert parallel size divides a count below one
        return f"use a positive multiple of {ep} experts"
    return (f"use a multiple of {ep} experts, or an expert parallel size that divides {n}: "
            f"{spoken(divisors(n))}")


def grouped_gemm_needs_ampere(config: Draft) -> None:
    """The grouped GEMM kernels need compute capability 8.0 or newer."""
    if not config.moe_grouped_gemm:
        return
    capability = config.env.capability()
    if capability is None:
        config.warn("--moe-grouped-gemm needs a GPU of compute capability 8.0 or newer; no GPU "
                    "is visible, so this is not checked", flags=("moe_grouped_gemm",))
    elif capability[0] < 8:
        config.error(f"--moe-grouped-gemm needs compute capability 8.0 or newer, the target GPU "
                     f"has {capability[0]}.{capability[1]}", flags=("moe_grouped_gemm",),
                     hint="drop --moe-grouped-gemm, or run on an Ampere or newer GPU")


def shortcut_connection_not_with_fsdp(config: Draft) -> None:
    """A shortcut block bypasses FSDP's per-layer all-gather hooks."""
    fsdp = _fsdp_name(config)
    if config.get("moe_shortcut_connection") and fsdp:
        config.error(f"--moe-shortcut-connection does not work with {fsdp}: the shortcut block "
                     "skips the per-layer parameter all-gathers, leaving parameters sharded",
                     flags=("moe_shortcut_connection", fsdp),
                     hint="use DDP or --use-distributed-optimizer instead of FSDP")


def shortcut_connection_cuda_graphs(config: Draft) -> None:
    """Shortcut blocks can only be CUDA-graphed by the local block-scoped implementation."""
    impl = config.get("cuda_graph_impl", "none")
    if not config.get("moe_shortcut_connection") or impl == "none":
        return
    scope = config.get("inference_cuda_graph_scope")
    if impl == "local" and getattr(scope, "name", scope) == "block":
        return
    config.error(f"--moe-shortcut-connection supports CUDA graphs only with --cuda-graph-impl "
                 f"local and --inference-cuda-graph-scope block (got --cuda-graph-impl {impl})",
                 flags=("moe_shortcut_connection", "cuda_graph_impl"),
                 hint="use --cuda-graph-impl local --inference-cuda-graph-scope block, or "
                      "--cuda-graph-impl none")


def megakernel_backend_not_with_fsdp(config: Draft) -> None:
    """The MOK megakernel backend has not been validated with FSDP."""
    fsdp = _fsdp_name(config)
    if config.get("moe_megakernel_backend") == "mok" and fsdp:
        config.error(f"the 'mok' MoE megakernel backend is not validated with {fsdp}",
                     flags=("moe_megakernel_backend", fsdp),
                     hint="choose another megakernel backend, or drop FSDP")


def upcycling_needs_save(config: Draft) -> None:
    """Upcycling writes the converted MoE model to ``--save``."""
    if config.moe_use_upcycling and config.get("save") is None:
        config.error("--moe-use-upcycling needs --save: the upcycled model is written there",
                     flags=("moe_use_upcycling", "save"),
                     hint="add --save DIR")


def norm_before_up_proj_needs_latent(config: Draft) -> None:
    """The norm before the latent up-projection only exists with latent projections."""
    if config.get("moe_use_norm_before_up_proj") and config.moe_latent_size is None:
        config.error("--moe-use-norm-before-up-proj needs --moe-latent-size",
                     flags=("moe_use_norm_before_up_proj", "moe_latent_size"),
                     hint="set --moe-latent-size, or drop --moe-use-norm-before-up-proj")


def latent_size_is_positive(config: Draft) -> None:
    """A latent projection needs a positive dimension."""
    size = config.moe_latent_size
    if size is not None and size <= 0:
        config.error(f"--moe-latent-size must be greater than 0, got {size}",
                     flags=("moe_latent_size",),
                     hint="give a positive latent dimension, or leave the flag unset")


def latent_size_needs_experts(config: Draft) -> None:
    """Latent projections belong to MoE layers."""
    if config.moe_latent_size is not None and config.num_experts is None:
        config.error(f"--moe-latent-size {config.moe_latent_size} only applies to MoE models, "
                     "but --num-experts is not set",
                     flags=("moe_latent_size", "num_experts"),
                     hint="set --num-experts, or drop --moe-latent-size")


def graphed_expert_parallelism_pads_experts(config: Draft) -> None:
    """Local CUDA graphs with expert parallelism pad the experts (0.16, 0.17).

    Megatron 0.16 and 0.17: local CUDA graphs with expert parallelism need
    ``--moe-pad-experts-for-cuda-graph-inference`` (0.17: not with the inference-optimized
    layers)."""
    if not config.env.megatron.between("0.16.0", "0.17.1") \
            or config.get("cuda_graph_impl") != "local" \
            or config.expert_model_parallel_size <= 1 \
            or config.moe_pad_experts_for_cuda_graph_inference:
        return
    if config.env.megatron.at_least("0.17.0") \
            and config.get("transformer_impl") == "inference_optimized":
        return
    config.error(f"local CUDA graphs with expert parallelism (--expert-model-parallel-size "
                 f"{config.expert_model_parallel_size}) need "
                 f"--moe-pad-experts-for-cuda-graph-inference in Megatron {config.env.megatron}",
                 flags=("cuda_graph_impl", "expert_model_parallel_size",
                        "moe_pad_experts_for_cuda_graph_inference"),
                 hint="add --moe-pad-experts-for-cuda-graph-inference")


CHECKS: tuple[Callable[[Draft], None], ...] = (
    graphed_expert_parallelism_pads_experts,
    expert_parallel_needs_experts,
    experts_divide_over_expert_parallel_ranks,
    grouped_gemm_needs_ampere,
    shortcut_connection_not_with_fsdp,
    shortcut_connection_cuda_graphs,
    megakernel_backend_not_with_fsdp,
    upcycling_needs_save,
    norm_before_up_proj_needs_latent,
    latent_size_is_positive,
    latent_size_needs_experts,
)
