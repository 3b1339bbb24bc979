"""GTP settings: tensor-parallel weight sharding with weight rematerialization.

Option strings, types and defaults follow Megatron-LM's parser; help texts are this
plugin's own. ``gtp_weight_remat_size`` and ``expert_gtp_weight_remat_size`` have no
flag: they are derived from the weight-shard counts.
"""


from typing import Annotated, Optional

from megaplug import Computed, Flag, options


@options
class GtpOptions:
    """How many shards each weight is split into, and how GTP communicates."""

    tensor_parallel_num_weight_shards: Optional[int] = Flag(
        default=None,
        help="Split each dense weight into this many shards, a multiple of "
             "--tensor-model-parallel-size; the extra factor is gathered on use "
             "(default: the tensor-parallel size, i.e. no GTP).")
    expert_tensor_parallel_num_weight_shards: Optional[int] = Flag(
        default=None,
        help="Split each expert weight into this many shards, a multiple of "
             "--expert-tensor-parallel-size (default: that size, i.e. no GTP).")
    gtp_remat_opt_in_modules: Annotated[list[str], Flag(
        help="Modules whose weights GTP rematerializes (all-gathers) on use.")] = []
    gtp_remat_reduce_scatter_with_fp32_accumulation: bool = Flag(
        default=False,
        help="Reduce-scatter GTP weight gradients in low precision over the wire but "
             "accumulate them in FP32.")
    gtp_remat_nccl_ub: bool = Flag(
        default=False,
        help="Register the GTP gradient reduce-scatter buffers in NCCL symmetric "
             "memory.")
    gtp_expert_remat_nccl_ub: bool = Flag(
        default=False,
        help="Register the expert GTP gradient reduce-scatter buffers in NCCL symmetric "
             "memory.")
    gtp_weight_remat_size: int = Computed(
        "Ranks a dense weight is rematerialized over: weight shards divided by the "
        "tensor-parallel size.", default=1)
    expert_gtp_weight_remat_size: int = Computed(
        "Ranks an expert weight is rematerialized over: expert weight shards divided by "
        "the expert tensor-parallel size.", default=1)


__all__ = ["GtpOptions"]
