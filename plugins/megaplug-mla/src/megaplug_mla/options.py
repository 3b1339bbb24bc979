"""Multi-latent attention settings, as one options dataclass.

Option strings, types and defaults follow Megatron-LM's parser; help texts are this
plugin's own.
"""


from typing import Optional


from megaplug import Flag, options


@options
class MlaOptions:
    """Multi-latent attention (low-rank query/key/value projections) and its RoPE scaling."""

    multi_latent_attention: bool = Flag(
        default=False,
        help="Use multi-latent attention: queries, keys and values go through low-rank "
             "latent projections.")
    q_lora_rank: Optional[int] = Flag(
        default=None,
        help="Rank of the query's low-rank projection; unset projects queries at full "
             "rank.")
    kv_lora_rank: int = Flag(default=32, help="Rank of the shared key/value low-rank projection.")
    qk_head_dim: int = Flag(
        default=128,
        help="Per-head query/key dimension without the positional part.")
    qk_pos_emb_head_dim: int = Flag(
        default=64,
        help="Per-head query/key dimension that carries rotary position information.")
    v_head_dim: int = Flag(default=128, help="Per-head value dimension.")
    attention_latent_norm_epsilon: Optional[float] = Flag(
        default=None,
        help="Epsilon of the query and key/value latent norms; unset uses "
             "--norm-epsilon.")
    rotary_scaling_factor: float = Flag(
        default=1.0,
        help="Context-extension factor of the rotary embeddings (YaRN).")
    mscale: float = Flag(
        default=1.0,
        help="YaRN attention-scale coefficient for multi-latent attention.")
    mscale_all_dim: float = Flag(
        default=0.0,
        help="YaRN attention-scale coefficient applied over all dimensions.")
    cache_mla_latents: bool = Flag(
        default=False,
        help="Cache the down-projected latents instead of keys and values during flash "
             "decoding.")
    mla_down_proj_fusion: bool = Flag(
        default=False,
        help="Fuse the query and key/value down-projections and their input norm where "
             "the backend supports it.")


__all__ = ["MlaOptions"]
