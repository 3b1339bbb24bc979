"""Activation recomputation and activation offloading."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def normalize_recompute_activations(config: Draft) -> None:
    """--recompute-activations is shorthand for selective recomputation."""
    if config.recompute_activations:
        config.set("recompute_granularity", "selective",
                   reason="--recompute-activations means selective recomputation",
                   inputs=("recompute_activations",))
    config.discard("recompute_activations")


def normalize_checkpoint_activations(config: Draft) -> None:
    """--checkpoint-activations is retired: Megatron stops when it sees it."""
    if config.checkpoint_activations:
        config.error("--checkpoint-activations is no longer supported",
                     flags=("checkpoint_activations",),
                     hint="use --recompute-activations, or --recompute-granularity and "
                          "--recompute-method for more control")
    config.discard("checkpoint_activations")


def derive_cpu_offloading(config: Draft) -> None:
    """Offloading some layers' activations switches CPU offloading on; otherwise the key is absent."""  # noqa: E501
    if (config.cpu_offloading_num_layers or 0) > 0:
        config.set("cpu_offloading", True, reason="some layers are offloaded",
                   inputs=("cpu_offloading_num_layers",))
    else:
        config.discard("cpu_offloading")


def check_distributed_saved_activations(config: Draft) -> None:
    """Sharding saved activations needs TP > 1, full recomputation and a method."""
    if not config.distribute_saved_activations:
        return
    tensor_parallel = config.get("tensor_model_parallel_size", 1) or 1
    if tensor_parallel <= 1:
        config.error("--distribute-saved-activations needs tensor parallelism, but "
                     "--tensor-model-parallel-size is 1",
                     flags=("distribute_saved_activations", "tensor_model_parallel_size"),
                     hint="use --tensor-model-parallel-size 2 or more, or drop "
                          "--distribute-saved-activations")
    if config.recompute_granularity != "full":
        config.error("--distribute-saved-activations works only with --recompute-granularity full "
                     f"(got {config.recompute_granularity})",
                     flags=("distribute_saved_activations", "recompute_granularity"),
                     hint="add --recompute-granularity full")
    if config.recompute_method is None:
        config.error("--distribute-saved-activations needs a --recompute-method",
                     flags=("distribute_saved_activations", "recompute_method"),
                     hint="add --recompute-method uniform or block")
    torch_version = config.env.package_version("torch")
    if torch_version is not None and not config.env.version_at_least("torch", "1.10"):
        config.error(f"--distribute-saved-activations needs torch >= 1.10, found {torch_version}",
                     flags=("distribute_saved_activations",), hint="upgrade torch")


def check_selective_has_no_method(config: Draft) -> None:
    """Recompute methods apply to full recomputation only."""
    if config.recompute_granularity == "selective" and config.recompute_method is not None:
        config.error(f"--recompute-method {config.recompute_method} is not supported with "
                     "selective recomputation (recompute method is not yet supported for "
                     "selective recomputing granularity)",
                     flags=("recompute_method", "recompute_granularity"),
                     hint="drop --recompute-method, or use --recompute-granularity full")


def check_fine_grained_offloading(config: Draft) -> None:
    """Fine-grained offloading runs on Transformer Engine layers, with TE's v1 offload path."""
    if not config.fine_grained_activation_offloading:
        return
    impl = config.get("transformer_impl", "transformer_engine")
    if impl != "transformer_engine":
        config.error("--fine-grained-activation-offloading needs --transformer-impl "
                     f"transformer_engine (got {impl})",
                     flags=("fine_grained_activation_offloading", "transformer_impl"),
                     hint="use --transformer-impl transformer_engine")
    if config.env.version_at_least("transformer_engine", "2.10.0") \
            and config.env.getenv("NVTE_CPU_OFFLOAD_V1", "0") != "1":
        config.error("--fine-grained-activation-offloading with Transformer Engine >= 2.10 needs "
                     "NVTE_CPU_OFFLOAD_V1=1 in the environment, so weights are not offloaded",
                     flags=("fine_grained_activation_offloading", "NVTE_CPU_OFFLOAD_V1"),
                     hint="export NVTE_CPU_OFFLOAD_V1=1")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    normalize_checkpoint_activations,
    normalize_recompute_activations,
)

DERIVE: tuple[Callable[[Draft], None], ...] = (derive_cpu_offloading,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_distributed_saved_activations,
    check_selective_has_no_method,
    check_fine_grained_offloading,
)
