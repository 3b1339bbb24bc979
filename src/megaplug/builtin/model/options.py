"""The model plugin's settings: network shape, attention, embeddings, activations, norms.

One dataclass holds every model flag (a plugin declares one options class); comments split
it into the areas a reader looks for. Defaults, spellings and types follow Megatron's
parser exactly, including its quirks (``--onnx-safe`` takes a ``bool(...)`` of its text).
"""


from dataclasses import field
from typing import Literal, Optional

from typing_extensions import Annotated

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
    num_layers: Annotated[Optional[int], Flag(
        help="Number of transformer layers (decoder layers for encoder-decoder models).")] = None
    encoder_num_layers: Annotated[Optional[int], Flag(
        help="Number of encoder layers; used when --num-layers is not given.")] = None
    decoder_num_layers: Annotated[Optional[int], Flag(
        help="Number of decoder layers of an encoder-decoder model.")] = None
    hidden_size: Annotated[Optional[int], Flag(help="Width of the transformer hidden state.")] = None
    ffn_hidden_size: Annotated[Optional[int], Flag(
        help="Width of the MLP's inner layer; defaults to 4x hidden size (about 8/3x with "
             "--swiglu).")] = None
    num_attention_heads: Annotated[Optional[int], Flag(help="Number of attention heads.")] = None
    kv_channels: Annotated[Optional[int], Flag(
        help="Size of each attention head; defaults to hidden size / attention heads.")] = None
    group_query_attention: Annotated[bool, Flag(
        help="Share key/value heads among query heads (see --num-query-groups).")] = False
    num_query_groups: Annotated[int, Flag(
        help="Number of key/value head groups for group-query attention.")] = 1
    max_position_embeddings: Annotated[Optional[int], Flag(
        help="Longest sequence the position embeddings cover; at least --seq-length.")] = None
    make_vocab_size_divisible_by: Annotated[int, Flag(
        help="Pad the vocabulary size up to a multiple of this, for faster kernels.")] = 128
    untie_embeddings_and_output_weights: Annotated[bool, Flag(
        help="Give the output layer its own weights instead of sharing the input embedding.")] = False
    transformer_impl: Annotated[Literal["local", "transformer_engine", "inference_optimized"], Flag(
        help="Which implementation builds the transformer layers.")] = "transformer_engine"
    is_hybrid_model: Annotated[bool, Flag(
        help="The model mixes Mamba, attention and MLP layers.")] = False

    # -- multi-token prediction ---------------------------------------------------------
    mtp_num_layers: Annotated[Optional[int], Flag(
        help="Number of multi-token prediction (MTP) layers; none disables MTP.")] = None
    mtp_loss_scaling_factor: Annotated[float, Flag(
        help="Weight of the MTP loss relative to the main loss.")] = 0.1
    mtp_standalone: Annotated[bool, Flag(
        help="Place the MTP layers in their own pipeline stage.")] = False
    mtp_use_repeated_layer: Annotated[bool, Flag(
        help="Reuse one MTP layer for every prediction depth.")] = False
    mtp_detach_heads: Annotated[bool, Flag(
        help="Stop MTP gradients from flowing into the shared output heads.")] = False
    mtp_hsm: Annotated[bool, Flag(help="Use the hidden-state-mixing variant of MTP.")] = False
    mtp_hybrid_override_pattern: Annotated[Optional[str], Flag(
        help="Deprecated per-depth MTP layer pattern of hybrid models; kept for old "
             "checkpoints (use --hybrid-layer-pattern).")] = None

    # -- attention -----------------------------------------------------------------------
    attention_backend: Annotated[AttnBackend, Flag(
        help="Attention kernel family; auto lets Transformer Engine choose.")] = AttnBackend.auto
    flash_attention_version: Annotated[Optional[Literal[2, 3, 4]], Flag(
        help="Flash-attention major version to use.")] = None
    softmax_type: Annotated[Literal["vanilla", "off-by-one", "learnable"], Flag(
        help="Softmax variant of attention.")] = "vanilla"
    attention_dropout: Annotated[float, Flag(help="Dropout probability of attention weights.")] = 0.1
    qk_layernorm: Annotated[bool, Flag(help="Normalize queries and keys before attention.")] = False
    qk_l2_norm: Annotated[bool, Flag(help="L2-normalize queries and keys before attention.")] = False
    qk_clip: Annotated[bool, Flag(
        help="Rescale query/key weights when attention logits exceed a threshold "
             "(Transformer Engine 2.9+).")] = False
    qk_clip_alpha: Annotated[float, Flag(
        help="Share of the query/key rescaling given to queries; between 0 and 1.")] = 0.5
    qk_clip_threshold: Annotated[float, Flag(
        help="Largest attention logit allowed before query/key clipping applies.")] = 100
    attention_output_gate: Annotated[bool, Flag(
        help="Gate the attention output with a learned sigmoid.")] = False
    apply_query_key_layer_scaling: Annotated[bool, Flag(
        help="Scale query-key products by the layer number (forces softmax in fp32).")] = False
    window_size: Annotated[Optional[tuple], Flag(
        type=tuple_type,
        help="Sliding-window attention size as 'left,right'; none means full attention.")] = None
    window_attn_skip_freq: Annotated[Optional[LayerPattern], Flag(
        type=moe_freq_type,
        help="Which layers use full attention instead of the window: N for every Nth layer, "
             "or a 0/1 list expression such as '[1,1,1,0]*3'.")] = None
    experimental_attention_variant: Annotated[
        Optional[Literal["gdn", "gdn2", "dsa", "gated_delta_net"]],
        Flag(help="Experimental attention variant to use in attention layers.")] = None
    linear_attention_freq: Annotated[Optional[LayerPattern], Flag(
        type=la_freq_type,
        help="Where linear-attention layers go: N for N-1 linear layers per full attention "
             "layer, or a 0/1 list expression.")] = None
    csa_compress_ratios: Annotated[Optional[LayerPattern], Flag(
        type=compress_ratios_type,
        help="Per-layer compression ratios (0, 4 or 128) of compressed sparse attention, "
             "as a list expression.")] = None

    # -- DeepSeek sparse attention indexer ------------------------------------------------
    dsa_indexer_n_heads: Annotated[Optional[int], Flag(help="Heads of the sparse-attention indexer.")] = None
    dsa_indexer_head_dim: Annotated[Optional[int], Flag(help="Head size of the sparse-attention indexer.")] = None
    dsa_indexer_topk: Annotated[Optional[int], Flag(help="Keys each query keeps in sparse attention.")] = None
    dsa_indexer_topk_freq: Annotated[int, Flag(
        help="Recompute the indexer's top-k selection every this many layers.")] = 1
    dsa_indexer_skip_topk_offset: Annotated[int, Flag(
        help="Layers at the start that skip top-k selection.")] = 0
    dsa_indexer_loss_coeff: Annotated[Optional[float], Flag(help="Weight of the indexer's auxiliary loss.")] = None
    dsa_indexer_use_sparse_loss: Annotated[bool, Flag(
        help="Compute the indexer loss on the selected keys only.")] = False
    dsa_kernel_backend: Annotated[Literal["none", "tilelang", "cudnn"], Flag(
        help="Kernel library for sparse attention.")] = "none"
    dsa_indexer_rope_interleaved: Annotated[bool, Flag(
        help="Use interleaved rotary embeddings in the indexer.")] = False
    dsa_indexer_rotate_activation: Annotated[bool, Flag(
        "--no-dsa-indexer-rotate-activation", "--disable-dsa-indexer-rotate-activation",
        help="Do not rotate the indexer's activations.")] = True
    dsa_indexer_scoring_relu: Annotated[bool, Flag(
        "--no-dsa-indexer-scoring-relu", "--disable-dsa-indexer-scoring-relu",
        help="Do not apply ReLU to the indexer's scores.")] = True
    dsa_indexer_k_norm_epsilon: Annotated[Optional[float], Flag(
        help="Epsilon of the indexer's key normalization.")] = None
    dsa_indexer_k_norm_fp32: Annotated[bool, Flag(
        help="Normalize the indexer's keys in fp32.")] = False

    # -- linear attention (gated delta net) -------------------------------------------
    linear_conv_kernel_dim: Annotated[int, Flag(help="Convolution width of linear attention.")] = 4
    linear_key_head_dim: Annotated[int, Flag(help="Key head size of linear attention.")] = 128
    linear_value_head_dim: Annotated[int, Flag(help="Value head size of linear attention.")] = 128
    linear_num_key_heads: Annotated[int, Flag(help="Key heads of linear attention.")] = 16
    linear_num_value_heads: Annotated[int, Flag(help="Value heads of linear attention.")] = 32

    # -- position embeddings -------------------------------------------------------------
    position_embedding_type: Annotated[PositionEmbedding, Flag(
        help="How token positions are encoded.")] = "learned_absolute"
    use_rotary_position_embeddings: Annotated[bool, Flag(
        help="Deprecated: same as --position-embedding-type rope.")] = False
    add_position_embedding: Annotated[bool, Flag(
        "--no-position-embedding",
        help="Deprecated: drop position embeddings (use --position-embedding-type).")] = True
    rotary_base: Annotated[int, Flag(help="Base period of rotary embeddings.")] = 10000
    rotary_percent: Annotated[float, Flag(
        help="Fraction of each head's dimensions that rotary embeddings rotate.")] = 1.0
    rotary_interleaved: Annotated[bool, Flag(
        help="Rotate interleaved dimension pairs instead of the two halves.")] = False
    rotary_seq_len_interpolation_factor: Annotated[Optional[int], Flag(
        help="Divide positions by this factor to stretch rotary embeddings.")] = None
    use_rope_scaling: Annotated[bool, Flag(help="Apply Llama 3.x rotary frequency scaling.")] = False
    rope_scaling_factor: Annotated[float, Flag(help="Llama 3.x rotary scaling factor.")] = 8.0
    no_rope_freq: Annotated[Optional[LayerPattern], Flag(
        type=no_rope_freq_type,
        help="Layers that skip rotary embeddings: N for every Nth layer, or a 0/1 list "
             "expression such as '([0]*3+[1])*3'.")] = None
    mrope_section: Annotated[Optional[list[int]], Flag(
        help="Rotary dimensions given to each multimodal axis (needed with mrope).")] = None
    original_max_position_embeddings: Annotated[Optional[int], Flag(
        help="Context length the model was first trained with, for rotary scaling.")] = None
    yarn_original_max_position_embeddings: Annotated[Optional[int], Flag(
        help="Original context length for YaRN frequency correction.")] = None
    yarn_beta_fast: Annotated[Optional[float], Flag(help="YaRN beta-fast correction parameter.")] = None
    yarn_beta_slow: Annotated[Optional[float], Flag(help="YaRN beta-slow correction parameter.")] = None
    yarn_correction_range_round_to_int: Annotated[
        Optional[bool],
        Flag("--yarn-correction-range-round-to-int", action="store_true",
             help="Round the YaRN correction range to whole numbers."),
        # Megatron's parser lists True for this spelling, but the first one's None wins.
        Flag("--no-yarn-correction-range-round-to-int", action="store_false", default=True,
             help="Keep the YaRN correction range fractional."),
    ] = None
    relative_attention_num_buckets: Annotated[int, Flag(
        help="Buckets of relative position embeddings.")] = 32
    relative_attention_max_distance: Annotated[int, Flag(
        help="Largest distance relative position embeddings tell apart.")] = 128

    # -- activations, residuals and normalization ---------------------------------------
    swiglu: Annotated[bool, Flag(help="Use a SiLU-gated linear unit MLP instead of GeLU.")] = False
    squared_relu: Annotated[bool, Flag(help="Use squared ReLU instead of GeLU.")] = False
    quick_geglu: Annotated[bool, Flag(help="Use the quick-GeLU gated linear unit.")] = False
    openai_gelu: Annotated[bool, Flag(
        help="Use OpenAI's GeLU approximation (only for old checkpoints).")] = False
    use_te_activation_func: Annotated[bool, Flag(
        help="Use Transformer Engine's activation functions.")] = False
    use_fused_weighted_squared_relu: Annotated[bool, Flag(
        help="Use the fused weighted squared-ReLU kernel.")] = False
    glu_linear_offset: Annotated[float, Flag(
        help="Constant added to the linear half of a gated linear unit.")] = 0.0
    activation_func_clamp_value: Annotated[Optional[float], Flag(
        help="Clamp activation inputs to this magnitude.")] = None
    onnx_safe: Annotated[Optional[bool], Flag(
        type=bool, action="store",
        help="Work around known ONNX exporter problems (any non-empty value enables it).")] = None
    hidden_dropout: Annotated[float, Flag(help="Dropout probability of the hidden state.")] = 0.1
    fp32_residual_connection: Annotated[bool, Flag(
        help="Keep the residual stream in fp32 (with --fp16 or --bf16).")] = False
    apply_residual_connection_post_layernorm: Annotated[bool, Flag(
        help="Take the residual after the layer norm, as the original BERT did.")] = False
    normalization: Annotated[Literal["LayerNorm", "RMSNorm"], Flag(
        help="Normalization layer type.")] = "LayerNorm"
    layernorm_epsilon: Annotated[float, Flag(
        "--norm-epsilon", help="Epsilon of the normalization layers.")] = 1e-5
    layernorm_zero_centered_gamma: Annotated[bool, Flag(
        "--apply-layernorm-1p", help="Store norm weights as offsets from 1 (zero-centered gamma).")] = False
    fused_residual_rmsnorm: Annotated[bool, Flag(
        help="Fuse the residual add into RMSNorm.")] = False
    use_transformer_engine_op_fuser: Annotated[bool, Flag(
        help="Build MLPs with Transformer Engine's operation fuser.")] = False
    add_bias_linear: Annotated[bool, Flag(
        "--disable-bias-linear", help="Leave biases out of every linear layer.")] = True
    add_qkv_bias: Annotated[bool, Flag(
        help="Give the query/key/value projection a bias even without other biases.")] = False
    embedding_min_norm: Annotated[Optional[float], Flag(
        help="Rescale embedding vectors whose norm falls below this value.")] = None
    output_projection_groups: Annotated[Optional[int], Flag(
        help="Split the attention output projection into this many groups.")] = None
    output_projection_lora_rank: Annotated[Optional[int], Flag(
        help="Rank of the low-rank attention output projection.")] = None

    # -- manifold-constrained hyper-connections and wide residuals ----------------------
    enable_mhc_connections: Annotated[bool, Flag(
        help="Use manifold-constrained hyper-connections between layers.")] = False
    mhc_num_residual_streams: Annotated[int, Flag(help="Residual streams of hyper-connections.")] = 4
    mhc_sinkhorn_iterations: Annotated[int, Flag(
        help="Sinkhorn iterations that project hyper-connection mixing matrices.")] = 20
    mhc_init_gating_factor: Annotated[float, Flag(
        help="Initial gating factor of hyper-connections.")] = 0.01
    mhc_recompute_layer_num: Annotated[Optional[int], Flag(
        help="Layers whose hyper-connections are recomputed in the backward pass.")] = None
    wide_residual_num_streams: Annotated[Optional[int], Flag(
        "--wide-residual", help="Use streamwise wide residuals with this many streams.")] = None
    wide_residual_streamwise_sigmoid_init_scale: Annotated[float, Flag(
        help="Spread of the initial streamwise write logits.")] = 0.01
    wide_residual_learned_retention: Annotated[bool, Flag(
        help="Learn one bounded carry factor shared by every residual stream.")] = False
    wide_residual_retention_init: Annotated[float, Flag(
        help="Initial learned retention factor.")] = 0.999
    wide_residual_retention_max_forget: Annotated[float, Flag(
        help="Largest forget rate learned retention may reach.")] = 0.10

    # -- maximal update parametrization --------------------------------------------------
    use_mup: Annotated[bool, Flag(help="Use maximal update parametrization (muP).")] = False
    mup_width_mult: Annotated[float, Flag(help="muP width multiplier over the base model.")] = 1.0
    mup_base_hidden_size: Annotated[Optional[int], Flag(help="Hidden size of the muP base model.")] = None
    mup_embedding_mult: Annotated[float, Flag(help="muP embedding output multiplier.")] = 1.0
    mup_output_mult: Annotated[float, Flag(help="muP output logit multiplier.")] = 1.0
    mup_base_head_dim: Annotated[Optional[float], Flag(help="Head size of the muP base model.")] = None
    mup_attn_scale_power: Annotated[float, Flag(
        help="Power of the head size in muP attention scaling.")] = 1.0

    # -- Mamba / hybrid layers -------------------------------------------------------------
    mamba_state_dim: Annotated[int, Flag(help="State size of Mamba layers.")] = 128
    mamba_head_dim: Annotated[int, Flag(help="Head size of Mamba layers.")] = 64
    mamba_num_groups: Annotated[int, Flag(help="Groups of Mamba layers.")] = 8
    mamba_num_heads: Annotated[Optional[int], Flag(
        help="Heads of Mamba layers; derived from the other sizes when not given.")] = None
    use_mamba_mem_eff_path: Annotated[bool, Flag(
        "--disable-mamba-mem-eff-path", help="Turn off Mamba's memory-efficient kernel path.")] = True
    gdp_num_householder: Annotated[int, Flag(
        help="Householder reflections per gated delta product step.")] = 3
    gdp_cutedsl_kernel: Annotated[bool, Flag(
        help="Use the CuTe DSL kernel for gated delta products.")] = False
    gdp_num_chunk_states_to_recompute: Annotated[int, Flag(
        help="Chunk states of gated delta products recomputed in the backward pass.")] = 2

    # -- BERT and biencoder retrieval --------------------------------------------------------
    bert_binary_head: Annotated[bool, Flag(
        "--bert-no-binary-head", help="Leave out BERT's next-sentence binary head.")] = True
    ict_head_size: Annotated[Optional[int], Flag(help="Output size of the ICT head.")] = None
    biencoder_projection_dim: Annotated[int, Flag(
        help="Projection size of the biencoder towers; 0 means no projection.")] = 0
    biencoder_shared_query_context_model: Annotated[bool, Flag(
        help="Share one model between the query and context towers.")] = False
    ict_load: Annotated[Optional[str], Flag(help="Directory of an ICT checkpoint to load.")] = None
    bert_load: Annotated[Optional[str], Flag(
        help="Directory of a BERT checkpoint to start the biencoder from.")] = None
    titles_data_path: Annotated[Optional[str], Flag(help="Path to the titles dataset.")] = None
    query_in_block_prob: Annotated[float, Flag(
        help="Probability that a query stays inside its block.")] = 0.1
    use_one_sent_docs: Annotated[bool, Flag(help="Keep documents of one sentence.")] = False
    evidence_data_path: Annotated[Optional[str], Flag(help="Path to the Wikipedia evidence file.")] = None
    retriever_report_topk_accuracies: Annotated[list[int], Flag(
        help="Top-k values whose retrieval accuracy is reported.")] = field(default_factory=list)
    retriever_score_scaling: Annotated[bool, Flag(
        help="Divide retriever scores by the square root of the hidden size.")] = False
    block_data_path: Annotated[Optional[str], Flag(help="Where to save or load block data.")] = None
    embedding_path: Annotated[Optional[str], Flag(help="Where to save or load evidence embeddings.")] = None
    indexer_batch_size: Annotated[int, Flag(help="Batch size of the evidence indexer.")] = 128
    indexer_log_interval: Annotated[int, Flag(
        help="Batches between progress reports of the indexer.")] = 1000

    # -- vision ------------------------------------------------------------------------------
    num_classes: Annotated[int, Flag(help="Classes of the vision classification task.")] = 1000
    img_h: Annotated[int, Flag(help="Input image height in pixels.")] = 224
    img_w: Annotated[int, Flag(help="Input image width in pixels.")] = 224
    num_channels: Annotated[int, Flag(help="Channels of the input images.")] = 3
    patch_dim: Annotated[int, Flag(help="Side length of an image patch.")] = 16
    classes_fraction: Annotated[float, Flag(help="Fraction of the classes to train on.")] = 1.0
    data_per_class_fraction: Annotated[float, Flag(
        help="Fraction of each class's images to train on.")] = 1.0
    data_sharding: Annotated[bool, Flag(
        "--no-data-sharding", help="Do not shard the image data across ranks.")] = True
    head_lr_mult: Annotated[float, Flag(
        help="Learning-rate multiplier of the head when fine-tuning.")] = 1.0
    vision_pretraining: Annotated[bool, Flag(help="Pretrain a vision model.")] = False
    vision_pretraining_type: Annotated[Literal["classify", "inpaint", "dino"], Flag(
        help="Vision pretraining objective.")] = "classify"
    vision_backbone_type: Annotated[Literal["vit", "mit", "swin"], Flag(
        help="Vision backbone architecture.")] = "vit"
    swin_backbone_type: Annotated[Literal["tiny", "base", "h3"], Flag(
        help="Size of the Swin backbone.")] = "tiny"
    mask_type: Annotated[Literal["random", "row"], Flag(help="Mask shape for inpainting.")] = "random"
    mask_factor: Annotated[float, Flag(help="Scale of inpainting masks.")] = 1.0
    iter_per_epoch: Annotated[int, Flag(help="Iterations per epoch.")] = 1250
    dino_local_img_size: Annotated[int, Flag(help="Size of DINO's local crops.")] = 96
    dino_local_crops_number: Annotated[int, Flag(help="Number of DINO local crops.")] = 10
    dino_head_hidden_size: Annotated[int, Flag(help="Hidden size of the DINO head.")] = 2048
    dino_bottleneck_size: Annotated[int, Flag(help="Bottleneck size of the DINO head.")] = 256
    dino_freeze_last_layer: Annotated[float, Flag(
        help="Epochs during which DINO's last layer stays frozen.")] = 1
    dino_norm_last_layer: Annotated[bool, Flag(
        help="Weight-normalize DINO's last layer.")] = False
    dino_warmup_teacher_temp: Annotated[float, Flag(
        help="DINO teacher temperature at the start of warm-up.")] = 0.04
    dino_teacher_temp: Annotated[float, Flag(help="DINO teacher temperature after warm-up.")] = 0.07
    dino_warmup_teacher_temp_epochs: Annotated[int, Flag(
        help="Epochs of DINO teacher-temperature warm-up.")] = 30

    # -- heterogeneous layers -------------------------------------------------------------------
    heterogeneous_layers_config_path: Annotated[Optional[str], Flag(
        help="JSON file (HuggingFace Llama-Nemotron style) describing each layer.")] = None
    heterogeneous_layers_config_encoded_json: Annotated[Optional[str], Flag(
        help="The heterogeneous layer description as a JSON string (kept in checkpoints).")] = None
