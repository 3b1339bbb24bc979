"""The data plugin: datasets and splits, data loading, FIM, SFT, sequence packing, tokenizer.

Ports the data and tokenizer parts of Megatron's ``validate_args``: the legacy default
split, exclusive data sources, the --seq-length / --encoder-seq-length pair, packed
variable-length datasets (which decide ``variable_seq_lengths``) and the FIM checks.
Checks that mainly concern another plugin's settings live there: the model plugin compares
the sequence lengths with --max-position-embeddings, and the parallel plugin sets the
dynamic-CP packing scheduler and sizes the packed-sequence buffer.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

#: Each phase's rules, named by the module that holds them (imported when the phase first
#: runs, so listing or documenting the plugin imports none), in the order they run.
rules = Rules(
    # the split and sequence length every other plugin reads
    normalize=(f"{__name__}.paths:NORMALIZE_SPLIT", f"{__name__}.sequences:NORMALIZE",
               f"{__name__}.paths:NORMALIZE_PHASES"),
    derive=(f"{__name__}.packing:DERIVE", f"{__name__}.tokenizer:DERIVE"),
    # in the order Megatron's validate_args makes them
    validate=(f"{__name__}.paths:VALIDATE", f"{__name__}.sequences:VALIDATE",
              f"{__name__}.packing:VALIDATE", f"{__name__}.paths:VALIDATE_SOURCES",
              f"{__name__}.fim:VALIDATE", f"{__name__}.tokenizer:VALIDATE"),
)

megaplug_plugin = PluginInfo(
    name="data",
    description="Datasets and splits, data loading, FIM, SFT, sequence packing and the "
                "tokenizer.",
    options=f"{__name__}.options:DataOptions",
    # parallel resolves dynamic context parallelism, which picks its own packing scheduler
    # before variable_seq_lengths is decided here.
    after=("parallel",),
    rules=rules,
)
