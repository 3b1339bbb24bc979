"""The data plugin's settings: datasets, loading, FIM, tokenizer, SFT and sequence packing."""


from typing import List, Literal, NewType, Optional, Union


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


@options
class DataPathOptions:
    """Where the datasets come from and how they are split."""

    data_path: Optional[List[RawText]] = Flag(
        default=None,
        nargs="*",
        help="Dataset prefixes, optionally weighted (weight1 prefix1 ...), split into train, "
             "validation and test by --split.")
    phase_transition_iterations: Union[str, List[int], None] = Flag(
        default=None,
        type=str,
        help="Comma-separated iterations at which the data blend changes phase (needs a fixed "
             "global batch size).")
    split: Optional[str] = Flag(
        default=None,
        help="Comma-separated train, validation and test proportions of --data-path, "
             "e.g. 90,5,5.")
    train_data_path: Optional[List[RawText]] = Flag(
        default=None,
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent training set.")
    valid_data_path: Optional[List[RawText]] = Flag(
        default=None,
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent validation set.")
    test_data_path: Optional[List[RawText]] = Flag(
        default=None,
        nargs="*", help="Dataset prefixes (optionally weighted) of an independent test set.")
    data_args_path: Optional[str] = Flag(
        default=None,
        help="File holding the --data-path value, for blends too long for a command line.")
    per_split_data_args_path: Optional[str] = Flag(
        default=None,
        help="JSON file with train, valid and test keys holding the per-split data paths.")
    per_dataset_sequences_path: Optional[RawText] = Flag(
        default=None,
        help="JSON file with the number of sequences of each dataset "
             "(see tools/build_sequences_per_dataset.py).")


@options
class LoaderOptions:
    """Index caches, memory mapping, sequence lengths and the dataloader."""

    dataloader_fast_cache_load: bool = Flag(
        default=False,
        help="Load dataset indexes through the fast path; every cache must already exist in "
             "--data-cache-path.")
    dataloader_defer_npy_index_mmap: bool = Flag(
        default=False,
        help="Memory-map the .npy index files only on first access; every cache must already "
             "exist in --data-cache-path.")
    data_cache_path: Optional[RawText] = Flag(
        default=None,
        help="Directory for the cached dataset index files.")
    mmap_bin_files: bool = Flag(
        "--no-mmap-bin-files", default=True,
        help="Read .bin data files instead of memory-mapping them.")
    mock_data: bool = Flag(
        default=False,
        help="Generate synthetic data instead of reading datasets, where a mock dataset "
             "exists.")
    seq_length: Optional[int] = Flag(default=None, help="Maximum sequence length to train on.")
    encoder_seq_length: Optional[int] = Flag(
        default=None,
        help="Maximum encoder sequence length; an alternative to --seq-length, not both.")
    decoder_seq_length: Optional[int] = Flag(default=None, help="Maximum decoder sequence length.")
    sample_rate: float = Flag(
        default=1.0,
        help="Fraction of the training data to sample, between 0 and 1.")
    mask_prob: float = Flag(default=0.15, help="Probability of masking a token.")
    short_seq_prob: float = Flag(default=0.1, help="Probability of producing a shorter sequence.")
    num_workers: int = Flag(default=2, help="Number of dataloader worker processes.")
    reset_position_ids: bool = Flag(
        default=False,
        help="Restart position ids after each end-of-document token.")
    reset_attention_mask: bool = Flag(
        default=False,
        help="Stop attention across end-of-document tokens.")
    dataloader_inter_document_masking: bool = Flag(
        default=False,
        help="Return cu_seqlens at document boundaries so attention stays within each "
             "document.")
    eod_mask_loss: bool = Flag(default=False, help="Leave end-of-document tokens out of the loss.")
    create_attention_mask_in_dataloader: bool = Flag(
        "--no-create-attention-mask-in-dataloader", default=True,
        help="Do not build attention masks in the dataloader.")
    num_dataset_builder_threads: int = Flag(
        default=1,
        help="Threads per rank that build the datasets.")
    object_storage_cache_path: Optional[str] = Flag(
        default=None,
        help="Directory caching index files of datasets read from S3 or MSC.")
    mid_level_dataset_surplus: float = Flag(
        default=0.005,
        help="Extra fraction of samples built for mid-level (blended) datasets.")
    allow_ambiguous_pad_tokens: bool = Flag(
        default=False,
        help="Mask out every token sharing the pad token's id, even when the tokenizer gives "
             "the pad no unique id (risks unstable training).")


@options
class FimOptions:
    """Fill-in-the-middle data transformation."""

    fim_data: bool = Flag(default=False, help="Use the fill-in-the-middle (FIM) dataset.")
    fim_rate: float = Flag(
        default=0.5,
        help="Probability of turning a training sample into FIM format.")
    fim_spm_rate: float = Flag(
        default=0.5,
        help="Probability that a FIM sample uses SPM rather than PSM ordering.")
    fim_split_sample: Optional[str] = Flag(
        default=None,
        help="Text around which a sample is split into fragments for FIM.")
    fim_fragment_rate: Optional[float] = Flag(
        default=None,
        help="FIM probability of each fragment when --fim-split-sample is set.")
    fim_no_prefix: Optional[str] = Flag(
        default=None,
        help="Leave fragments starting with this prefix out of FIM.")
    fim_prefix_token: str = Flag(default="<fim_prefix>", help="Token marking the FIM prefix.")
    fim_middle_token: str = Flag(default="<fim_middle>", help="Token marking the FIM middle.")
    fim_suffix_token: str = Flag(default="<fim_suffix>", help="Token marking the FIM suffix.")
    fim_pad_token: str = Flag(default="<fim_pad>", help="Token used as FIM padding.")
    fim_eod_token: str = Flag(default="<|endoftext|>", help="Token ending a FIM document.")


@options
class TokenizerOptions:
    """The tokenizer and its vocabulary."""

    vocab_size: Optional[int] = Flag(
        default=None,
        help="Vocabulary size, for tokenizers that do not know their own.")
    padded_vocab_size: Optional[int] = Flag(
        default=None,
        help="Vocabulary size after padding, when known in advance.")
    pad_vocab_size: bool = Flag(
        "--no-pad-vocab-size", "--disable-pad-vocab-size", default=True,
        help="Keep the vocabulary size as is instead of padding it to a divisible size.")
    vocab_file: Optional[str] = Flag(default=None, help="Path of the vocabulary file.")
    merge_file: Optional[str] = Flag(default=None, help="Path of the BPE merge file.")
    vocab_extra_ids: int = Flag(
        default=0,
        help="Number of extra sentinel ids added to the vocabulary (T5).")
    tokenizer_type: Optional[str] = Flag(
        default=None,
        choices=TOKENIZER_TYPES, help="Which tokenizer to build.")
    tokenizer_model: Optional[str] = Flag(
        default=None,
        help="Tokenizer model file or Hugging Face name.")
    metadata_path: Optional[str] = Flag(
        "--tokenizer-metadata", default=None, help="Path of the tokenizer's metadata file.")
    special_tokens: Optional[List[str]] = Flag(
        "--tokenizer-special-tokens", default=None, help="Special tokens to add to the tokenizer.")
    tiktoken_pattern: Optional[Literal["v1", "v2"]] = Flag(
        default=None,
        help="Pre-tokenization regex pattern version of TikTokenizer.")
    tiktoken_num_special_tokens: int = Flag(
        default=1000,
        help="Number of special tokens reserved by TikTokenizer.")
    tokenizer_sentencepiece_legacy: bool = Flag(
        default=False,
        help="Use SentencePiece's legacy behaviour.")
    tokenizer_sentencepiece_ignore_extra_whitespaces: bool = Flag(
        "--no-tokenizer-sentencepiece-ignore-extra-whitespaces",
        "--disable-tokenizer-sentencepiece-ignore-extra-whitespaces", default=True,
        help="Keep repeated whitespace in SentencePiece tokenization.")
    tokenizer_hf_no_use_fast: bool = Flag(
        default=False,
        help="Use the slow (Python) Hugging Face tokenizer.")
    tokenizer_hf_no_include_special_tokens: bool = Flag(
        default=False,
        help="Do not add special tokens when encoding with a Hugging Face tokenizer.")
    trust_remote_code: bool = Flag(
        default=False,
        help="Allow a Hugging Face tokenizer to run code from its repository.")
    null_tokenizer_eod_id: Optional[int] = Flag(
        default=None,
        help="End-of-document token id of NullTokenizer.")
    null_tokenizer_pad_id: int = Flag(default=-1, help="Pad token id of NullTokenizer.")
    chat_template: Optional[str] = Flag(
        default=None,
        help="Chat template applied by the tokenizer to conversations.")
    use_gigatoken: bool = Flag(default=False, help="Use the gigatoken tokenizer backend.")


@options
class SftOptions:
    """Supervised fine-tuning, variable-length datasets and sequence packing."""

    sft: bool = Flag(default=False, help="Run supervised fine-tuning (SFT).")
    sft_tokenizer_prompt_format: str = Flag(
        default="nemotron-h-aligned",
        help="Prompt format the SFT tokenizer applies.")
    sft_loss_log_mode: Literal["token-weighted", "microbatch"] = Flag(
        default="token-weighted",
        help="How logged SFT loss is averaged: over trainable tokens or over microbatch "
             "losses.")
    sft_mock_dataset_config_json: Optional[str] = Flag(
        default=None,
        help="Sequence-length source of the SFT mock dataset, as inline JSON or a JSON file "
             "path (a lognormal default is derived from --seq-length).")
    use_varlen_dataset: bool = Flag(
        default=False,
        help="Train on the variable-length packed (THD) instruction dataset; excludes "
             "--sft.")
    varlen_sbhd_validation: bool = Flag(
        default=False,
        help="Emit right-padded SBHD samples instead of packed ones, to check the THD path "
             "numerically.")
    varlen_mock_dataset_config_json: Optional[str] = Flag(
        default=None,
        help="Sequence-length source of the variable-length mock dataset, as inline JSON or "
             "a JSON file path.")
    sequence_packing_scheduler: Optional[Literal["dp_balanced", "default_dynamic_cp"]] = Flag(
        default=None,
        help="Scheduler packing variable-length samples "
             "into microbatches.")
    pad_packed_seq_alignment: Optional[RawText] = Flag(
        default=None,
        help="Pad packed THD inputs to this CP-local multiple, or 'max'.")
    train_full_dataset: bool = Flag(
        default=False,
        help="Train for exactly one pass over an externally provided dataset.")
    variable_seq_lengths: bool = Computed(
        "Whether sequence lengths vary between microbatches (true when packing).", default=False)


@options
class DataOptions(DataPathOptions, LoaderOptions, FimOptions, TokenizerOptions, SftOptions):
    """Every setting of the data plugin."""
