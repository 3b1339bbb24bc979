"""The data plugin: datasets and splits, data loading, FIM, SFT, sequence packing, tokenizer.

Ports the data and tokenizer parts of Megatron's ``validate_args``: the legacy default
split, exclusive data sources, the --seq-length / --encoder-seq-length pair, packed
variable-length datasets (which decide ``variable_seq_lengths``) and the FIM checks.
Checks that mainly concern another plugin's settings live there: the model plugin compares
the sequence lengths with --max-position-embeddings, and the parallel plugin sets the
dynamic-CP packing scheduler and sizes the packed-sequence buffer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from megaplug import Draft, PluginInfo, hookimpl

from . import fim, packing, paths, sequences, tokenizer
from .options import DataOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="data",
    description="Datasets and splits, data loading, FIM, SFT, sequence packing and the "
                "tokenizer.",
    # parallel resolves dynamic context parallelism, which picks its own packing scheduler
    # before variable_seq_lengths is decided here.
    after=("parallel",),
)

#: Checks in the order Megatron's validate_args makes them.
CHECKS: tuple[Callable[[Draft], None], ...] = (
    paths.check_data_path_or_args_file,
    paths.check_per_split_paths_or_args_file,
    paths.check_builder_threads,
    sequences.check_context_parallel_multiple,
    packing.check_varlen_excludes_sft,
    packing.check_sbhd_validation,
    packing.check_dynamic_cp_scheduler,
    packing.check_per_token_loss,
    packing.check_scheduler_cuda_graphs,
    paths.check_single_data_source,
    fim.check_fim,
    tokenizer.warn_missing_tokenizer_inputs,
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the data, tokenizer, SFT and packing flags."""
    flags.add_options(DataOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Fill the split and sequence length every other plugin reads; parse phase transitions."""
    paths.default_split(config)
    sequences.fill_seq_length(config)
    paths.parse_phase_transitions(config)


@hookimpl
def derive(config: Draft) -> None:
    """Attention masks, SFT mock lengths, the packing scheduler and variable lengths."""
    if config.dataloader_inter_document_masking and config.create_attention_mask_in_dataloader:
        # The dataset omits the mask with inter-document masking; building one anyway would
        # make tensor-parallel ranks broadcast mismatched batches.
        config.set("create_attention_mask_in_dataloader", False,
                   reason="--dataloader-inter-document-masking",
                   inputs=("dataloader_inter_document_masking",))
    packing.default_sft_mock_config(config)
    packing.default_varlen_scheduler(config)
    packing.derive_variable_seq_lengths(config)


@hookimpl
def validate(config: Draft) -> None:
    """Run every data and tokenizer check."""
    for check in CHECKS:
        check(config)
