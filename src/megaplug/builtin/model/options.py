"""The model plugin's settings: network shape, attention, embeddings, activations, norms.

One dataclass holds every model flag (a plugin declares one options class); comments split
it into the areas a reader looks for. Defaults, spellings and types follow Megatron's
parser exactly, including its quirks (``--onnx-safe`` takes a ``bool(...)`` of its text).
"""


from typing import Annotated, Literal, Optional

from megaplug import Flag, options

from .types import (
    AttnBackend,
    LayerPattern,
    compress_ratios_type,
    la_freq_type,
    moe_freq_type,
    no_rope_freq_type,
    tuple_type,
)

PositionEmbedding = Literal["learned_absolute", "rope", "yarn", "mrope", "relative", "none"]


@options
class ModelOptions:
    """Every flag of the ``model`` plugin."""

    # -- network size ------------------------------------------------------------------
    num_layers: Optional[int] = Flag(
        default=None,
        help="Number of transformer layers (decoder layers for encoder-decoder models).")
    encoder_num_layers: Optional[int] = Flag(
        default=None,
        help="Number of encoder layers; used when --num-layers is not given.")
    decoder_num_layers: Optional[int] = Flag(
        default=None,
        help="Number of decoder layers of an encoder-decoder model.")
    hidden_size: Optional[int] = Flag(default=None, help="Width of the transformer hidden state.")
    ffn_hidden_size: Optional[int] = Flag(
        default=None,
        help="Width of the MLP's inner layer; defaults to 4x hidden size (about 8/3x with "
             "--swiglu).")
    num_attention_heads: Optional[int] = Flag(default=None, help="Number of attention heads.")
    kv_channels: Optional[int] = Flag(
        default=None,
        help="Size of each attention head; defaults to hidden size / attention heads.")
    group_query_attention: bool = Flag(
        default=False,
        help="Share key/value heads among query heads (see --num-query-groups).")
    num_query_groups: int = Flag(
        default=1,
        help="Number of key/value head groups for group-query attention.")
    max_position_embeddings: Optional[int] = Flag(
        default=None,
        help="Longest sequence the position embeddings cover; at least --seq-length.")
    make_vocab_size_divisible_by: int = Flag(
        default=128,
        help="Pad the vocabulary size up to a multiple of this, for faster kernels.")
    untie_embeddings_and_output_weights: bool = Flag(
        default=False,
        help="Give the output layer its own weights instead of sharing the input embedding.")
    transformer_impl: Literal["local", "transformer_engine", "inference_optimized"] = Flag(
        default="transformer_engine",
        help="Which implementation builds the transformer layers.")
    is_hybrid_model: bool = Flag(
        default=False,
        help="The model mixes Mamba, attention and MLP layers.")

    # -- multi-token prediction ---------------------------------------------------------
    mtp_num_layers: Optional[int] = Flag(
        default=None,
        help="Number of multi-token prediction (MTP) layers; none disables MTP.")
    mtp_loss_scaling_factor: float = Flag(
        default=0.1,
        help="Weight of the MTP loss relative to the main loss.")
    mtp_standalone: bool = Flag(
        default=False,
        help="Place the MTP layers in their own pipeline stage.")
    mtp_use_repeated_layer: bool = Flag(
        default=False,
        help="Reuse one MTP layer for every prediction depth.")
    mtp_detach_heads: bool = Flag(
        default=False,
        help="Stop MTP gradients from flowing into the shared output heads.")
    mtp_hsm: bool = Flag(default=False, help="Use the hidden-state-mixing variant of MTP.")
    mtp_hybrid_override_pattern: Optional[str] = Flag(
        default=None,
        help="Deprecated per-depth MTP layer pattern of hybrid models; kept for old "
             "checkpoints (use --hybrid-layer-pattern).")

    # -- attention -----------------------------------------------------------------------
    attention_backend: AttnBackend = Flag(
        default=AttnBackend.auto,
        help="Attention kernel family; auto lets Transformer Engine choose.")
    flash_attention_version: Optional[Literal[2, 3, 4]] = Flag(
        default=None,
        help="Flash-attention major version to use.")
    softmax_type: Literal["vanilla", "off-by-one", "learnable"] = Flag(
        default="vanilla",
        help="Softmax variant of attention.")
    attention_dropout: float = Flag(default=0.1, help="Dropout probability of attention weights.")
    qk_layernorm: bool = Flag(default=False, help="Normalize queries and keys before attention.")
    qk_l2_norm: bool = Flag(default=False, help="L2-normalize queries and keys before attention.")
    qk_clip: bool = Flag(
        default=False,
        help="Rescale query/key weights when attention logits exceed a threshold "
             "(Transformer Engine 2.9+).")
    qk_clip_alpha: float = Flag(
        default=0.5,
        help="Share of the query/key rescaling given to queries; between 0 and 1.")
    qk_clip_threshold: float = Flag(
        default=100,
        help="Largest attention logit allowed before query/key clipping applies.")
    attention_output_gate: bool = Flag(
        default=False,
        help="Gate the attention output with a learned sigmoid.")
    apply_query_key_layer_scaling: bool = Flag(
        default=False,
        help="Scale query-key products by the layer number (forces softmax in fp32).")
    window_size: Optional[tuple] = Flag(
        default=None,
        type=tuple_type,
        help="Sliding-window attention size as 'left,right'; none means full attention.")
    window_attn_skip_freq: Optional[LayerPattern] = Flag(
        default=None,
        type=moe_freq_type,
        help="Which layers use full attention instead of the window: N for every Nth layer, "
             "or a 0/1 list expression such as '[1,1,1,0]*3'.")
    experimental_attention_variant: Optional[
        Literal["gdn", "gdn2", "dsa", "gated_delta_net"]] = Flag(
        default=None,
        help="Experimental attention variant to use in attention layers.")
    linear_attention_freq: Optional[LayerPattern] = Flag(
        default=None,
        type=la_freq_type,
        help="Where linear-attention layers go: N for N-1 linear layers per full attention "
             "layer, or a 0/1 list expression.")
    csa_compress_ratios: Optional[LayerPattern] = Flag(
        default=None,
        type=compress_ratios_type,
        help="Per-layer compression ratios (0, 4 or 128) of compressed sparse attention, "
             "as a list expression.")

    # -- DeepSeek sparse attention indexer ------------------------------------------------
    dsa_indexer_n_heads: Optional[int] = Flag(
        default=None, help="Heads of the sparse-attention indexer.")
    dsa_indexer_head_dim: Optional[int] = Flag(
        default=None, help="Head size of the sparse-attention indexer.")
    dsa_indexer_topk: Optional[int] = Flag(
        default=None, help="Keys each query keeps in sparse attention.")
    dsa_indexer_topk_freq: int = Flag(
        default=1,
        help="Recompute the indexer's top-k selection every this many layers.")
    dsa_indexer_skip_topk_offset: int = Flag(
        default=0,
        help="Layers at the start that skip top-k selection.")
    dsa_indexer_loss_coeff: Optional[float] = Flag(
        default=None, help="Weight of the indexer's auxiliary loss.")
    dsa_indexer_use_sparse_loss: bool = Flag(
        default=False,
        help="Compute the indexer loss on the selected keys only.")
    dsa_kernel_backend: Literal["none", "tilelang", "cudnn"] = Flag(
        default="none",
        help="Kernel library for sparse attention.")
    dsa_indexer_rope_interleaved: bool = Flag(
        default=False,
        help="Use interleaved rotary embeddings in the indexer.")
    dsa_indexer_rotate_activation: bool = Flag(
        "--no-dsa-indexer-rotate-activation", "--disable-dsa-indexer-rotate-activation",
        default=True,
        help="Do not rotate the indexer's activations.")
    dsa_indexer_scoring_relu: bool = Flag(
        "--no-dsa-indexer-scoring-relu", "--disable-dsa-indexer-scoring-relu", default=True,
        help="Do not apply ReLU to the indexer's scores.")
    dsa_indexer_k_norm_epsilon: Optional[float] = Flag(
        default=None,
        help="Epsilon of the indexer's key normalization.")
    dsa_indexer_k_norm_fp32: bool = Flag(
        default=False,
        help="Normalize the indexer's keys in fp32.")

    # -- linear attention (gated delta net) -------------------------------------------
    linear_conv_kernel_dim: int = Flag(default=4, help="Convolution width of linear attention.")
    linear_key_head_dim: int = Flag(default=128, help="Key head size of linear attention.")
    linear_value_head_dim: int = Flag(default=128, help="Value head size of linear attention.")
    linear_num_key_heads: int = Flag(default=16, help="Key heads of linear attention.")
    linear_num_value_heads: int = Flag(default=32, help="Value heads of linear attention.")

    # -- position embeddings -------------------------------------------------------------
    position_embedding_type: PositionEmbedding = Flag(
        default="learned_absolute",
        help="How token positions are encoded.")
    use_rotary_position_embeddings: bool = Flag(
        default=False,
        help="Deprecated: same as --position-embedding-type rope.")
    add_position_embedding: bool = Flag(
        "--no-position-embedding", default=True,
        help="Deprecated: drop position embeddings (use --position-embedding-type).")
    rotary_base: int = Flag(default=10000, help="Base period of rotary embeddings.")
    rotary_percent: float = Flag(
        default=1.0,
        help="Fraction of each head's dimensions that rotary embeddings rotate.")
    rotary_interleaved: bool = Flag(
        default=False,
        help="Rotate interleaved dimension pairs instead of the two halves.")
    rotary_seq_len_interpolation_factor: Optional[int] = Flag(
        default=None,
        help="Divide positions by this factor to stretch rotary embeddings.")
    use_rope_scaling: bool = Flag(default=False, help="Apply Llama 3.x rotary frequency scaling.")
    rope_scaling_factor: float = Flag(default=8.0, help="Llama 3.x rotary scaling factor.")
    no_rope_freq: Optional[LayerPattern] = Flag(
        default=None,
        type=no_rope_freq_type,
        help="Layers that skip rotary embeddings: N for every Nth layer, or a 0/1 list "
             "expression such as '([0]*3+[1])*3'.")
    mrope_section: Optional[list[int]] = Flag(
        default=None,
        help="Rotary dimensions given to each multimodal axis (needed with mrope).")
    original_max_position_embeddings: Optional[int] = Flag(
        default=None,
        help="Context length the model was first trained with, for rotary scaling.")
    yarn_original_max_position_embeddings: Optional[int] = Flag(
        default=None,
        help="Original context length for YaRN frequency correction.")
    yarn_beta_fast: Optional[float] = Flag(
        default=None, help="YaRN beta-fast correction parameter.")
    yarn_beta_slow: Optional[float] = Flag(
        default=None, help="YaRN beta-slow correction parameter.")
    yarn_correction_range_round_to_int: Annotated[
        Optional[bool],
        Flag("--yarn-correction-range-round-to-int", action="store_true",
             help="Round the YaRN correction range to whole numbers."),
        # Megatron's parser lists True for this spelling, but the first one's None wins.
        Flag("--no-yarn-correction-range-round-to-int", action="store_false", default=True,
             help="Keep the YaRN correction range fractional."),
    ] = None
    relative_attention_num_buckets: int = Flag(
        default=32,
        help="Buckets of relative position embeddings.")
    relative_attention_max_distance: int = Flag(
        default=128,
        help="Largest distance relative position embeddings tell apart.")

    # -- activations, residuals and normalization ---------------------------------------
    swiglu: bool = Flag(default=False, help="Use a SiLU-gated linear unit MLP instead of GeLU.")
    squared_relu: bool = Flag(default=False, help="Use squared ReLU instead of GeLU.")
    quick_geglu: bool = Flag(default=False, help="Use the quick-GeLU gated linear unit.")
    openai_gelu: bool = Flag(
        default=False,
        help="Use OpenAI's GeLU approximation (only for old checkpoints).")
    use_te_activation_func: bool = Flag(
        default=False,
        help="Use Transformer Engine's activation functions.")
    use_fused_weighted_squared_relu: bool = Flag(
        default=False,
        help="Use the fused weighted squared-ReLU kernel.")
    glu_linear_offset: float = Flag(
        default=0.0,
        help="Constant added to the linear half of a gated linear unit.")
    activation_func_clamp_value: Optional[float] = Flag(
        default=None,
        help="Clamp activation inputs to this magnitude.")
    onnx_safe: Optional[bool] = Flag(
        default=None,
        type=bool, action="store",
        help="Work around known ONNX exporter problems (any non-empty value enables it).")
    hidden_dropout: float = Flag(default=0.1, help="Dropout probability of the hidden state.")
    fp32_residual_connection: bool = Flag(
        default=False,
        help="Keep the residual stream in fp32 (with --fp16 or --bf16).")
    apply_residual_connection_post_layernorm: bool = Flag(
        default=False,
        help="Take the residual after the layer norm, as the original BERT did.")
    normalization: Literal["LayerNorm", "RMSNorm"] = Flag(
        default="LayerNorm",
        help="Normalization layer type.")
    layernorm_epsilon: float = Flag(
        "--norm-epsilon", default=1e-5, help="Epsilon of the normalization layers.")
    layernorm_zero_centered_gamma: bool = Flag(
        "--apply-layernorm-1p", default=False,
        help="Store norm weights as offsets from 1 (zero-centered gamma).")
    fused_residual_rmsnorm: bool = Flag(default=False, help="Fuse the residual add into RMSNorm.")
    use_transformer_engine_op_fuser: bool = Flag(
        default=False,
        help="Build MLPs with Transformer Engine's operation fuser.")
    add_bias_linear: bool = Flag(
        "--disable-bias-linear", default=True, help="Leave biases out of every linear layer.")
    add_qkv_bias: bool = Flag(
        default=False,
        help="Give the query/key/value projection a bias even without other biases.")
    embedding_min_norm: Optional[float] = Flag(
        default=None,
        help="Rescale embedding vectors whose norm falls below this value.")
    output_projection_groups: Optional[int] = Flag(
        default=None,
        help="Split the attention output projection into this many groups.")
    output_projection_lora_rank: Optional[int] = Flag(
        default=None,
        help="Rank of the low-rank attention output projection.")

    # -- manifold-constrained hyper-connections and wide residuals ----------------------
    enable_mhc_connections: bool = Flag(
        default=False,
        help="Use manifold-constrained hyper-connections between layers.")
    mhc_num_residual_streams: int = Flag(default=4, help="Residual streams of hyper-connections.")
    mhc_sinkhorn_iterations: int = Flag(
        default=20,
        help="Sinkhorn iterations that project hyper-connection mixing matrices.")
    mhc_init_gating_factor: float = Flag(
        default=0.01,
        help="Initial gating factor of hyper-connections.")
    mhc_recompute_layer_num: Optional[int] = Flag(
        default=None,
        help="Layers whose hyper-connections are recomputed in the backward pass.")
    wide_residual_num_streams: Optional[int] = Flag(
        "--wide-residual", default=None,
        help="Use streamwise wide residuals with this many streams.")
    wide_residual_streamwise_sigmoid_init_scale: float = Flag(
        default=0.01,
        help="Spread of the initial streamwise write logits.")
    wide_residual_learned_retention: bool = Flag(
        default=False,
        help="Learn one bounded carry factor shared by every residual stream.")
    wide_residual_retention_init: float = Flag(
        default=0.999,
        help="Initial learned retention factor.")
    wide_residual_retention_max_forget: float = Flag(
        default=0.10,
        help="Largest forget rate learned retention may reach.")

    # -- maximal update parametrization --------------------------------------------------
    use_mup: bool = Flag(default=False, help="Use maximal update parametrization (muP).")
    mup_width_mult: float = Flag(default=1.0, help="muP width multiplier over the base model.")
    mup_base_hidden_size: Optional[int] = Flag(
        default=None, help="Hidden size of the muP base model.")
    mup_embedding_mult: float = Flag(default=1.0, help="muP embedding output multiplier.")
    mup_output_mult: float = Flag(default=1.0, help="muP output logit multiplier.")
    mup_base_head_dim: Optional[float] = Flag(default=None, help="Head size of the muP base model.")
    mup_attn_scale_power: float = Flag(
        default=1.0,
        help="Power of the head size in muP attention scaling.")

    # -- Mamba / hybrid layers -------------------------------------------------------------
    mamba_state_dim: int = Flag(default=128, help="State size of Mamba layers.")
    mamba_head_dim: int = Flag(default=64, help="Head size of Mamba layers.")
    mamba_num_groups: int = Flag(default=8, help="Groups of Mamba layers.")
    mamba_num_heads: Optional[int] = Flag(
        default=None,
        help="Heads of Mamba layers; derived from the other sizes when not given.")
    use_mamba_mem_eff_path: bool = Flag(
        "--disable-mamba-mem-eff-path", default=True,
        help="Turn off Mamba's memory-efficient kernel path.")
    gdp_num_householder: int = Flag(
        default=3,
        help="Householder reflections per gated delta product step.")
    gdp_cutedsl_kernel: bool = Flag(
        default=False,
        help="Use the CuTe DSL kernel for gated delta products.")
    gdp_num_chunk_states_to_recompute: int = Flag(
        default=2,
        help="Chunk states of gated delta products recomputed in the backward pass.")

    # -- BERT and biencoder retrieval --------------------------------------------------------
    bert_binary_head: bool = Flag(
        "--bert-no-binary-head", default=True, help="Leave out BERT's next-sentence binary head.")
    ict_head_size: Optional[int] = Flag(default=None, help="Output size of the ICT head.")
    biencoder_projection_dim: int = Flag(
        default=0,
        help="Projection size of the biencoder towers; 0 means no projection.")
    biencoder_shared_query_context_model: bool = Flag(
        default=False,
        help="Share one model between the query and context towers.")
    ict_load: Optional[str] = Flag(default=None, help="Directory of an ICT checkpoint to load.")
    bert_load: Optional[str] = Flag(
        default=None,
        help="Directory of a BERT checkpoint to start the biencoder from.")
    titles_data_path: Optional[str] = Flag(default=None, help="Path to the titles dataset.")
    query_in_block_prob: float = Flag(
        default=0.1,
        help="Probability that a query stays inside its block.")
    use_one_sent_docs: bool = Flag(default=False, help="Keep documents of one sentence.")
    evidence_data_path: Optional[str] = Flag(
        default=None, help="Path to the Wikipedia evidence file.")
    retriever_report_topk_accuracies: Annotated[list[int], Flag(
        help="Top-k values whose retrieval accuracy is reported.")] = []
    retriever_score_scaling: bool = Flag(
        default=False,
        help="Divide retriever scores by the square root of the hidden size.")
    block_data_path: Optional[str] = Flag(default=None, help="Where to save or load block data.")
    embedding_path: Optional[str] = Flag(
        default=None, help="Where to save or load evidence embeddings.")
    indexer_batch_size: int = Flag(default=128, help="Batch size of the evidence indexer.")
    indexer_log_interval: int = Flag(
        default=1000,
        help="Batches between progress reports of the indexer.")

    # -- vision ------------------------------------------------------------------------------
    num_classes: int = Flag(default=1000, help="Classes of the vision classification task.")
    img_h: int = Flag(default=224, help="Input image height in pixels.")
    img_w: int = Flag(default=224, help="Input image width in pixels.")
    num_channels: int = Flag(default=3, help="Channels of the input images.")
    patch_dim: int = Flag(default=16, help="Side length of an image patch.")
    classes_fraction: float = Flag(default=1.0, help="Fraction of the classes to train on.")
    data_per_class_fraction: float = Flag(
        default=1.0,
        help="Fraction of each class's images to train on.")
    data_sharding: bool = Flag(
        "--no-data-sharding", default=True, help="Do not shard the image data across ranks.")
    head_lr_mult: float = Flag(
        default=1.0,
        help="Learning-rate multiplier of the head when fine-tuning.")
    vision_pretraining: bool = Flag(default=False, help="Pretrain a vision model.")
    vision_pretraining_type: Literal["classify", "inpaint", "dino"] = Flag(
        default="classify",
        help="Vision pretraining objective.")
    vision_backbone_type: Literal["vit", "mit", "swin"] = Flag(
        default="vit",
        help="Vision backbone architecture.")
    swin_backbone_type: Literal["tiny", "base", "h3"] = Flag(
        default="tiny",
        help="Size of the Swin backbone.")
    mask_type: Literal["random", "row"] = Flag(default="random", help="Mask shape for inpainting.")
    mask_factor: float = Flag(default=1.0, help="Scale of inpainting masks.")
    iter_per_epoch: int = Flag(default=1250, help="Iterations per epoch.")
    dino_local_img_size: int = Flag(default=96, help="Size of DINO's local crops.")
    dino_local_crops_number: int = Flag(default=10, help="Number of DINO local crops.")
    dino_head_hidden_size: int = Flag(default=2048, help="Hidden size of the DINO head.")
    dino_bottleneck_size: int = Flag(default=256, help="Bottleneck size of the DINO head.")
    dino_freeze_last_layer: float = Flag(
        default=1,
        help="Epochs during which DINO's last layer stays frozen.")
    dino_norm_last_layer: bool = Flag(default=False, help="Weight-normalize DINO's last layer.")
    dino_warmup_teacher_temp: float = Flag(
        default=0.04,
        help="DINO teacher temperature at the start of warm-up.")
    dino_teacher_temp: float = Flag(default=0.07, help="DINO teacher temperature after warm-up.")
    dino_warmup_teacher_temp_epochs: int = Flag(
        default=30,
        help="Epochs of DINO teacher-temperature warm-up.")

    # -- heterogeneous layers -------------------------------------------------------------------
    heterogeneous_layers_config_path: Optional[str] = Flag(
        default=None,
        help="JSON file (HuggingFace Llama-Nemotron style) describing each layer.")
    heterogeneous_layers_config_encoded_json: Optional[str] = Flag(
        default=None,
        help="The heterogeneous layer description as a JSON string (kept in checkpoints).")
