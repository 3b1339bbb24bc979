"""Torch FSDP2 (``--use-torch-fsdp2``): requirements and the settings it turns off.

The checks run in ``derive``, before other plugins derive anything, because Megatron checks
them early in ``validate_args`` against the values as given.
"""

from __future__ import annotations


from megaplug import Draft

from .environment import set_if_declared, single_device_connection

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

MIN_TORCH = "2.4.0"
_CKPT_FORMATS = ("torch_dist", "torch_dcp")


def check_torch_version(config: Draft) -> None:
    """FSDP2 needs a torch with ``fully_shard``; an absent torch is left to the launcher."""
    found = config.env.package_version("torch")
    if found is not None and not config.env.version_at_least("torch", MIN_TORCH):
        config.error(f"--use-torch-fsdp2 requires torch >= {MIN_TORCH}, found {found}",
                     flags=("use_torch_fsdp2",),
                     hint=f"upgrade torch to {MIN_TORCH} or later, or use --use-megatron-fsdp")


def check_parallelism(config: Draft) -> None:
    """FSDP2 shards over data parallel ranks only: no pipeline or expert parallelism."""
    pp = config.get("pipeline_model_parallel_size", 1)
    if pp != 1:
        config.error(f"--use-torch-fsdp2 is not supported with pipeline parallelism "
                     f"(--pipeline-model-parallel-size {pp})",
                     flags=("use_torch_fsdp2", "pipeline_model_parallel_size"),
                     hint="set --pipeline-model-parallel-size 1, or use --use-megatron-fsdp")
    ep = config.get("expert_model_parallel_size", 1)
    if ep != 1:
        config.error(f"--use-torch-fsdp2 is not supported with expert parallelism "
                     f"(--expert-model-parallel-size {ep})",
                     flags=("use_torch_fsdp2", "expert_model_parallel_size"),
                     hint="set --expert-model-parallel-size 1, or use --use-megatron-fsdp")


def check_model_settings(config: Draft) -> None:
    """Settings of other plugins that FSDP2 cannot work with (skipped when not installed)."""
    if config.get("gradient_accumulation_fusion", False):
        config.error("--use-torch-fsdp2 does not support gradient accumulation fusion",
                     flags=("use_torch_fsdp2", "gradient_accumulation_fusion"),
                     hint="add --no-gradient-accumulation-fusion")
    ckpt_format = config.get("ckpt_format")
    if ckpt_format is not None and ckpt_format not in _CKPT_FORMATS:
        config.error(f"--use-torch-fsdp2 cannot save --ckpt-format {ckpt_format}",
                     flags=("use_torch_fsdp2", "ckpt_format"),
                     hint="use --ckpt-format torch_dist or --ckpt-format torch_dcp")
    if not config.get("untie_embeddings_and_output_weights", True):
        config.error("--use-torch-fsdp2 needs separate input embedding and output weights",
                     flags=("use_torch_fsdp2", "untie_embeddings_and_output_weights"),
                     hint="add --untie-embeddings-and-output-weights")
    if config.get("fp16", False):
        config.error("--use-torch-fsdp2 does not support --fp16 yet",
                     flags=("use_torch_fsdp2", "fp16"), hint="train with --bf16 instead")


def check_device_connections(config: Draft) -> None:
    """FSDP overlaps communication on several CUDA streams; one connection serializes them."""
    if single_device_connection(config):
        config.error("--use-torch-fsdp2 needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, "
                     "found 1", flags=("use_torch_fsdp2", "CUDA_DEVICE_MAX_CONNECTIONS"),
                     hint="unset CUDA_DEVICE_MAX_CONNECTIONS or set it to 32")


def disable_low_precision_gather(config: Draft) -> None:
    """FSDP2 cannot all-gather FP8 (TE >= 2.0) or FP4 (TE < 2.7) params; fall back to bf16."""
    env = config.env
    if config.get("fp8_param_gather", False) and env.version_at_least("transformer_engine",
                                                                       "2.0.0"):
        set_if_declared(config, "fp8_param_gather", False, inputs=("use_torch_fsdp2",),
                        reason="FSDP2 does not all-gather FP8 params with Transformer Engine 2")
        config.warn("--fp8-param-gather is turned off: FSDP2 gathers bf16 params with "
                    "Transformer Engine >= 2.0", flags=("fp8_param_gather", "use_torch_fsdp2"))
    if config.get("fp4_param_gather", False) and not env.version_at_least("transformer_engine",
                                                                           "2.7.0.dev0"):
        if env.megatron.before("0.17.1"):  # megatron-core 0.17.1 made the refusal a fallback
            if env.knows_package("transformer_engine") or env.package_version(
                    "transformer_engine") is not None:
                config.error("--fp4-param-gather with --use-torch-fsdp2 requires Transformer "
                             "Engine >= 2.7.0.dev0", flags=("fp4_param_gather", "use_torch_fsdp2"),
                             hint="install Transformer Engine 2.7 or later, or drop "
                                  "--fp4-param-gather")
            return
        set_if_declared(config, "fp4_param_gather", False, inputs=("use_torch_fsdp2",),
                        reason="FSDP2 gathers FP4 params only with Transformer Engine >= 2.7")
        config.warn("--fp4-param-gather is turned off: FSDP2 gathers FP4 params only with "
                    "Transformer Engine >= 2.7", flags=("fp4_param_gather", "use_torch_fsdp2"))


def derive_torch_fsdp2(config: Draft) -> None:
    """Check FSDP2's requirements against the given values, then turn off what it lacks."""
    if not config.use_torch_fsdp2:
        return
    check_torch_version(config)
    check_parallelism(config)
    check_model_settings(config)
    check_device_connections(config)
    disable_low_precision_gather(config)


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (derive_torch_fsdp2,)
