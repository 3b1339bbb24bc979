"""The data plugin's settings: datasets, loading, FIM, tokenizer, SFT and sequence packing."""


from typing import List, Literal, NewType, Optional, Union

from typing_extensions import Annotated

from megaplug import Computed, Flag, options

#: Text taken verbatim from the command line: argparse applies no ``type`` to it.
RawText = NewType("RawText", str)

#: The names Megatron's tokenizer builder accepts for ``--tokenizer-type``.
TOKENIZER_TYPES = (
    "BertWordPieceLowerCase",
    "BertWordPieceCase",
    "GPT2BPETokenizer",
    "SentencePieceTokenizer",
    "GPTSentencePieceTokenizer",
    "HuggingFaceTokenizer",
    "Llama2Tokenizer",
    "TikTokenizer",
    "MultimodalTokenizer",
    "NullTokenizer",
    "NullMultimodalTokenizer",
    "SFTTokenizer",
)

#: Split proportions Megatron falls back to when --data-path comes without --split.
LEGACY_DEFAULT_SPLIT = "969, 30, 1"


@options
class DataPathOptions:
    """Where the datasets come from and how they are split."""

    data_path: Annotated[Optional[List[RawText]], Flag(
        nargs="*",
        help="Dataset prefixes, optionally weighted (weight1 prefix1 ...), split into train, "
             "validation and test by --split.")] = None
    phase_transition_iterations: Annotated[Union[str, List[int], None], Flag(
        type=str,
        help="Comma-separated iterations at which the data blend changes phase (needs a fixed "
             "global batch size).")] = None
    split: Annotated[Optional[str], Flag(
        help="Comma-separated train, validation and test proportions of --data-path, "
             "e.g. 90,5,5.")] = None
    train_data_path: Annotated[Optional[List[RawText]], Flag(
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent training set.")] = None
    valid_data_path: Annotated[Optional[List[RawText]], Flag(
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent validation set.")] = None
    test_data_path: Annotated[Optional[List[RawText]], Flag(
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent test set.")] = None
    data_args_path: Annotated[Optional[str], Flag(
        help="File holding the --data-path value, for blends too long for a command line.")] = None
    per_split_data_args_path: Annotated[Optional[str], Flag(
        help="JSON file with train, valid and test keys holding the per-split data paths.")] = None
    per_dataset_sequences_path: Annotated[Optional[RawText], Flag(
        help="JSON file with the number of sequences of each dataset "
             "(see tools/build_sequences_per_dataset.py).")] = None


@options
class LoaderOptions:
    """Index caches, memory mapping, sequence lengths and the dataloader."""

    dataloader_fast_cache_load: Annotated[bool, Flag(
        help="Load dataset indexes through the fast path; every cache must already exist in "
             "--data-cache-path.")] = False
    dataloader_defer_npy_index_mmap: Annotated[bool, Flag(
        help="Memory-map the .npy index files only on first access; every cache must already "
             "exist in --data-cache-path.")] = False
    data_cache_path: Annotated[Optional[RawText], Flag(
        help="Directory for the cached dataset index files.")] = None
    mmap_bin_files: Annotated[bool, Flag(
        "--no-mmap-bin-files", help="Read .bin data files instead of memory-mapping them.")] = True
    mock_data: Annotated[bool, Flag(
        help="Generate synthetic data instead of reading datasets, where a mock dataset "
             "exists.")] = False
    seq_length: Annotated[Optional[int], Flag(help="Maximum sequence length to train on.")] = None
    encoder_seq_length: Annotated[Optional[int], Flag(
        help="Maximum encoder sequence length; an alternative to --seq-length, not both.")] = None
    decoder_seq_length: Annotated[Optional[int], Flag(
        help="Maximum decoder sequence length.")] = None
    sample_rate: Annotated[float, Flag(
        help="Fraction of the training data to sample, between 0 and 1.")] = 1.0
    mask_prob: Annotated[float, Flag(help="Probability of masking a token.")] = 0.15
    short_seq_prob: Annotated[float, Flag(
        help="Probability of producing a shorter sequence.")] = 0.1
    num_workers: Annotated[int, Flag(help="Number of dataloader worker processes.")] = 2
    reset_position_ids: Annotated[bool, Flag(
        help="Restart position ids after each end-of-document token.")] = False
    reset_attention_mask: Annotated[bool, Flag(
        help="Stop attention across end-of-document tokens.")] = False
    dataloader_inter_document_masking: Annotated[bool, Flag(
        help="Return cu_seqlens at document boundaries so attention stays within each "
             "document.")] = False
    eod_mask_loss: Annotated[bool, Flag(help="Leave end-of-document tokens out of the loss.")] = False
    create_attention_mask_in_dataloader: Annotated[bool, Flag(
        "--no-create-attention-mask-in-dataloader",
        help="Do not build attention masks in the dataloader.")] = True
    num_dataset_builder_threads: Annotated[int, Flag(
        help="Threads per rank that build the datasets.")] = 1
    object_storage_cache_path: Annotated[Optional[str], Flag(
        help="Directory caching index files of datasets read from S3 or MSC.")] = None
    mid_level_dataset_surplus: Annotated[float, Flag(
        help="Extra fraction of samples built for mid-level (blended) datasets.")] = 0.005
    allow_ambiguous_pad_tokens: Annotated[bool, Flag(
        help="Mask out every token sharing the pad token's id, even when the tokenizer gives "
             "the pad no unique id (risks unstable training).")] = False


@options
class FimOptions:
    """Fill-in-the-middle data transformation."""

    fim_data: Annotated[bool, Flag(help="Use the fill-in-the-middle (FIM) dataset.")] = False
    fim_rate: Annotated[float, Flag(
        help="Probability of turning a training sample into FIM format.")] = 0.5
    fim_spm_rate: Annotated[float, Flag(
        help="Probability that a FIM sample uses SPM rather than PSM ordering.")] = 0.5
    fim_split_sample: Annotated[Optional[str], Flag(
        help="Text around which a sample is split into fragments for FIM.")] = None
    fim_fragment_rate: Annotated[Optional[float], Flag(
        help="FIM probability of each fragment when --fim-split-sample is set.")] = None
    fim_no_prefix: Annotated[Optional[str], Flag(
        help="Leave fragments starting with this prefix out of FIM.")] = None
    fim_prefix_token: Annotated[str, Flag(help="Token marking the FIM prefix.")] = "<fim_prefix>"
    fim_middle_token: Annotated[str, Flag(help="Token marking the FIM middle.")] = "<fim_middle>"
    fim_suffix_token: Annotated[str, Flag(help="Token marking the FIM suffix.")] = "<fim_suffix>"
    fim_pad_token: Annotated[str, Flag(help="Token used as FIM padding.")] = "<fim_pad>"
    fim_eod_token: Annotated[str, Flag(help="Token ending a FIM document.")] = "<|endoftext|>"


@options
class TokenizerOptions:
    """The tokenizer and its vocabulary."""

    vocab_size: Annotated[Optional[int], Flag(
        help="Vocabulary size, for tokenizers that do not know their own.")] = None
    padded_vocab_size: Annotated[Optional[int], Flag(
        help="Vocabulary size after padding, when known in advance.")] = None
    pad_vocab_size: Annotated[bool, Flag(
        "--no-pad-vocab-size", "--disable-pad-vocab-size",
        help="Keep the vocabulary size as is instead of padding it to a divisible size.")] = True
    vocab_file: Annotated[Optional[str], Flag(help="Path of the vocabulary file.")] = None
    merge_file: Annotated[Optional[str], Flag(help="Path of the BPE merge file.")] = None
    vocab_extra_ids: Annotated[int, Flag(
        help="Number of extra sentinel ids added to the vocabulary (T5).")] = 0
    tokenizer_type: Annotated[Optional[str], Flag(
        choices=TOKENIZER_TYPES, help="Which tokenizer to build.")] = None
    tokenizer_model: Annotated[Optional[str], Flag(
        help="Tokenizer model file or Hugging Face name.")] = None
    metadata_path: Annotated[Optional[str], Flag(
        "--tokenizer-metadata", help="Path of the tokenizer's metadata file.")] = None
    special_tokens: Annotated[Optional[List[str]], Flag(
        "--tokenizer-special-tokens", help="Special tokens to add to the tokenizer.")] = None
    tiktoken_pattern: Annotated[Optional[Literal["v1", "v2"]], Flag(
        help="Pre-tokenization regex pattern version of TikTokenizer.")] = None
    tiktoken_num_special_tokens: Annotated[int, Flag(
        help="Number of special tokens reserved by TikTokenizer.")] = 1000
    tokenizer_sentencepiece_legacy: Annotated[bool, Flag(
        help="Use SentencePiece's legacy behaviour.")] = False
    tokenizer_sentencepiece_ignore_extra_whitespaces: Annotated[bool, Flag(
        "--no-tokenizer-sentencepiece-ignore-extra-whitespaces",
        "--disable-tokenizer-sentencepiece-ignore-extra-whitespaces",
        help="Keep repeated whitespace in SentencePiece tokenization.")] = True
    tokenizer_hf_no_use_fast: Annotated[bool, Flag(
        help="Use the slow (Python) Hugging Face tokenizer.")] = False
    tokenizer_hf_no_include_special_tokens: Annotated[bool, Flag(
        help="Do not add special tokens when encoding with a Hugging Face tokenizer.")] = False
    trust_remote_code: Annotated[bool, Flag(
        help="Allow a Hugging Face tokenizer to run code from its repository.")] = False
    null_tokenizer_eod_id: Annotated[Optional[int], Flag(
        help="End-of-document token id of NullTokenizer.")] = None
    null_tokenizer_pad_id: Annotated[int, Flag(help="Pad token id of NullTokenizer.")] = -1
    chat_template: Annotated[Optional[str], Flag(
        help="Chat template applied by the tokenizer to conversations.")] = None
    use_gigatoken: Annotated[bool, Flag(help="Use the gigatoken tokenizer backend.")] = False


@options
class SftOptions:
    """Supervised fine-tuning, variable-length datasets and sequence packing."""

    sft: Annotated[bool, Flag(help="Run supervised fine-tuning (SFT).")] = False
    sft_tokenizer_prompt_format: Annotated[str, Flag(
        help="Prompt format the SFT tokenizer applies.")] = "nemotron-h-aligned"
    sft_loss_log_mode: Annotated[Literal["token-weighted", "microbatch"], Flag(
        help="How logged SFT loss is averaged: over trainable tokens or over microbatch "
             "losses.")] = "token-weighted"
    sft_mock_dataset_config_json: Annotated[Optional[str], Flag(
        help="Sequence-length source of the SFT mock dataset, as inline JSON or a JSON file "
             "path (a lognormal default is derived from --seq-length).")] = None
    use_varlen_dataset: Annotated[bool, Flag(
        help="Train on the variable-length packed (THD) instruction dataset; excludes "
             "--sft.")] = False
    varlen_sbhd_validation: Annotated[bool, Flag(
        help="Emit right-padded SBHD samples instead of packed ones, to check the THD path "
             "numerically.")] = False
    varlen_mock_dataset_config_json: Annotated[Optional[str], Flag(
        help="Sequence-length source of the variable-length mock dataset, as inline JSON or "
             "a JSON file path.")] = None
    sequence_packing_scheduler: Annotated[Optional[Literal["dp_balanced", "default_dynamic_cp"]],
                                          Flag(help="Scheduler packing variable-length samples "
                                                    "into microbatches.")] = None
    pad_packed_seq_alignment: Annotated[Optional[RawText], Flag(
        help="Pad packed THD inputs to this CP-local multiple, or 'max'.")] = None
    train_full_dataset: Annotated[bool, Flag(
        help="Train for exactly one pass over an externally provided dataset.")] = False
    variable_seq_lengths: Annotated[bool, Computed(
        "Whether sequence lengths vary between microbatches (true when packing).")] = False


@options
class DataOptions(DataPathOptions, LoaderOptions, FimOptions, TokenizerOptions, SftOptions):
    """Every setting of the data plugin."""
