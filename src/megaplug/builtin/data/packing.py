"""SFT and variable-length datasets, sequence packing and variable sequence lengths."""

from __future__ import annotations

import json

from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

DYNAMIC_CP = "default_dynamic_cp"
DP_BALANCED = "dp_balanced"


def _dynamic_cp(config: Draft) -> bool:
    return bool(config.get("dynamic_context_parallel", False))


def omit_mask_with_inter_document_masking(config: Draft) -> None:
    """No dataloader attention mask with inter-document masking: the dataset omits it.

    Building one anyway would make tensor-parallel ranks broadcast mismatched batches.
    """
    if config.dataloader_inter_document_masking and config.create_attention_mask_in_dataloader:
        config.set("create_attention_mask_in_dataloader", False,
                   reason="--dataloader-inter-document-masking",
                   inputs=("dataloader_inter_document_masking",))


def default_sft_mock_config(config: Draft) -> None:
    """SFT on mock data draws lognormal sequence lengths scaled to --seq-length."""
    if not (config.mock_data and config.sft) or config.sft_mock_dataset_config_json is not None:
        return
    seq = config.seq_length
    if seq is None:
        return
    distribution = {
        "mode": "distribution",
        "type": "lognormal",
        "min_seq_len": seq // 2,
        "max_seq_len": seq,
        "mean_seq_len": seq // 4 * 3,
        "lognormal_sigma": 1.1,
    }
    config.set("sft_mock_dataset_config_json", json.dumps(distribution),
               reason="lognormal default for --sft --mock-data", inputs=("seq_length",))


def default_varlen_scheduler(config: Draft) -> None:
    """The variable-length dataset yields unpacked samples, so it needs a packing scheduler."""
    if not config.use_varlen_dataset or config.varlen_sbhd_validation:
        return
    if config.sequence_packing_scheduler is None:
        scheduler = DYNAMIC_CP if _dynamic_cp(config) else DP_BALANCED
        config.set("sequence_packing_scheduler", scheduler, reason="--use-varlen-dataset",
                   inputs=("use_varlen_dataset", "dynamic_context_parallel"))


def derive_variable_seq_lengths(config: Draft) -> None:
    """Packed microbatches differ in length; pipeline stages must then exchange shapes."""
    packing = config.sequence_packing_scheduler is not None
    if config.variable_seq_lengths != packing:
        config.set("variable_seq_lengths", packing, inputs=("sequence_packing_scheduler",))


def check_varlen_excludes_sft(config: Draft) -> None:
    """Both select the packed-sequence dataset family; one run uses one of them."""
    if config.use_varlen_dataset and config.sft:
        config.error("--use-varlen-dataset and --sft cannot be used together",
                     flags=("use_varlen_dataset", "sft"),
                     hint="both choose the packed-sequence dataset; keep one of them")


def check_sbhd_validation(config: Draft) -> None:
    """SBHD validation pads samples instead of packing them, and needs a real dataset."""
    if not (config.use_varlen_dataset and config.varlen_sbhd_validation):
        return
    if config.sequence_packing_scheduler is not None:
        config.error("--varlen-sbhd-validation does not pack sequences, but a packing scheduler "
                     f"is set ({config.sequence_packing_scheduler})",
                     flags=("varlen_sbhd_validation", "sequence_packing_scheduler"),
                     hint="drop --sequence-packing-scheduler (and --dynamic-context-parallel)")
    if config.mock_data:
        config.error("--varlen-sbhd-validation needs a real dataset, not --mock-data",
                     flags=("varlen_sbhd_validation", "mock_data"),
                     hint="give a dataset with --data-path, or drop --varlen-sbhd-validation")


def check_dynamic_cp_scheduler(config: Draft) -> None:
    """The dynamic-CP scheduler only works with dynamic context parallelism."""
    if config.sequence_packing_scheduler == DYNAMIC_CP and not _dynamic_cp(config):
        config.error("--sequence-packing-scheduler default_dynamic_cp needs "
                     "--dynamic-context-parallel",
                     flags=("sequence_packing_scheduler",),
                     hint="add --dynamic-context-parallel, or use the dp_balanced scheduler")


def check_per_token_loss(config: Draft) -> None:
    """Packed microbatches hold different token counts; averaging per microbatch skews loss."""
    if config.sequence_packing_scheduler is None:
        return
    if not config.get("calculate_per_token_loss", False):
        config.error(f"sequence packing (--sequence-packing-scheduler "
                     f"{config.sequence_packing_scheduler}) needs --calculate-per-token-loss",
                     flags=("sequence_packing_scheduler", "calculate_per_token_loss"),
                     hint="add --calculate-per-token-loss")


def check_scheduler_cuda_graphs(config: Draft) -> None:
    """Transformer Engine CUDA graphs of the dp_balanced scheduler need fixed-shape batches."""
    if (config.sequence_packing_scheduler != DP_BALANCED
            or config.get("cuda_graph_impl") != "transformer_engine"):
        return
    micro = config.get("micro_batch_size")
    if not config.use_varlen_dataset or micro != 1:
        config.error("CUDA graphs with the dp_balanced packing scheduler need "
                     f"--use-varlen-dataset and --micro-batch-size 1 (got micro batch {micro})",
                     flags=("sequence_packing_scheduler", "cuda_graph_impl",
                            "use_varlen_dataset", "micro_batch_size"),
                     hint="use --use-varlen-dataset --micro-batch-size 1, or another "
                          "--cuda-graph-impl")
    if config.get("step_batch_size_schedule") is not None:
        config.error("CUDA graphs with the dp_balanced packing scheduler need a fixed global "
                     "batch size", flags=("step_batch_size_schedule", "cuda_graph_impl"),
                     hint="drop --step-batch-size-schedule, or another --cuda-graph-impl")


DERIVE: tuple[Callable[[Draft], None], ...] = (
    omit_mask_with_inter_document_masking,
    default_sft_mock_config,
    default_varlen_scheduler,
    derive_variable_seq_lengths,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_varlen_excludes_sft,
    check_sbhd_validation,
    check_dynamic_cp_scheduler,
    check_per_token_loss,
    check_scheduler_cuda_graphs,
)
