"""The data plugin: datasets and splits, data loading, FIM, SFT, sequence packing, tokenizer.

Ports the data and tokenizer parts of Megatron's ``validate_args``: the legacy default
split, exclusive data sources, the --seq-length / --encoder-seq-length pair, packed
variable-length datasets (which decide ``variable_seq_lengths``) and the FIM checks.
Checks that mainly concern another plugin's settings live there: the model plugin compares
the sequence lengths with --max-position-embeddings, and the parallel plugin sets the
dynamic-CP packing scheduler and sizes the packed-sequence buffer.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import fim, packing, paths, sequences, tokenizer

rules = Rules(
    # the split and sequence length every other plugin reads
    normalize=(paths.default_split, sequences.fill_seq_length, paths.parse_phase_transitions),
    derive=(packing.omit_mask_with_inter_document_masking, packing.default_sft_mock_config,
            packing.default_varlen_scheduler, packing.derive_variable_seq_lengths),
    # in the order Megatron's validate_args makes them
    validate=(paths.check_data_path_or_args_file, paths.check_per_split_paths_or_args_file,
              paths.check_builder_threads, sequences.check_context_parallel_multiple,
              packing.check_varlen_excludes_sft, packing.check_sbhd_validation,
              packing.check_dynamic_cp_scheduler, packing.check_per_token_loss,
              packing.check_scheduler_cuda_graphs, paths.check_single_data_source,
              fim.check_fim, tokenizer.warn_missing_tokenizer_inputs),
)

megaplug_plugin = PluginInfo(
    name="data",
    description="Datasets and splits, data loading, FIM, SFT, sequence packing and the "
                "tokenizer.",
    # parallel resolves dynamic context parallelism, which picks its own packing scheduler
    # before variable_seq_lengths is decided here.
    after=("parallel",),
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the data, tokenizer, SFT and packing flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import DataOptions

    flags.add_options(DataOptions)
