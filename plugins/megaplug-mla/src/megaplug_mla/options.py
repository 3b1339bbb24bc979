"""Multi-latent attention settings, as one options dataclass.

Option strings, types and defaults follow Megatron-LM's parser; help texts are this
plugin's own.
"""


from typing import Optional

from typing_extensions import Annotated

from megaplug import Flag, options


@options
class MlaOptions:
    """Multi-latent attention (low-rank query/key/value projections) and its RoPE scaling."""

    multi_latent_attention: Annotated[bool, Flag(
        help="Use multi-latent attention: queries, keys and values go through low-rank "
             "latent projections.")] = False
    q_lora_rank: Annotated[Optional[int], Flag(
        help="Rank of the query's low-rank projection; unset projects queries at full "
             "rank.")] = None
    kv_lora_rank: Annotated[int, Flag(
        help="Rank of the shared key/value low-rank projection.")] = 32
    qk_head_dim: Annotated[int, Flag(
        help="Per-head query/key dimension without the positional part.")] = 128
    qk_pos_emb_head_dim: Annotated[int, Flag(
        help="Per-head query/key dimension that carries rotary position information.")] = 64
    v_head_dim: Annotated[int, Flag(
        help="Per-head value dimension.")] = 128
    attention_latent_norm_epsilon: Annotated[Optional[float], Flag(
        help="Epsilon of the query and key/value latent norms; unset uses "
             "--norm-epsilon.")] = None
    rotary_scaling_factor: Annotated[float, Flag(
        help="Context-extension factor of the rotary embeddings (YaRN).")] = 1.0
    mscale: Annotated[float, Flag(
        help="YaRN attention-scale coefficient for multi-latent attention.")] = 1.0
    mscale_all_dim: Annotated[float, Flag(
        help="YaRN attention-scale coefficient applied over all dimensions.")] = 0.0
    cache_mla_latents: Annotated[bool, Flag(
        help="Cache the down-projected latents instead of keys and values during flash "
             "decoding.")] = False
    mla_down_proj_fusion: Annotated[bool, Flag(
        help="Fuse the query and key/value down-projections and their input norm where "
             "the backend supports it.")] = False


__all__ = ["MlaOptions"]
