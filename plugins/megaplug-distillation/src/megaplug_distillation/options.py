"""The logits-distillation settings, spelled and defaulted as Megatron's group."""


from typing import Literal, Optional

from typing_extensions import Annotated

from megaplug import Flag, options


@options
class DistillationOptions:
    """Flags for dumping a teacher's top logits and training a student on them."""

    logits_save_top_k: Annotated[Optional[int], Flag(
        help="Number of highest logits saved per token; required with --logits-save-dir.")] = None
    logits_save_top_p: Annotated[Optional[float], Flag(
        help="Nucleus threshold in (0, 1] applied after top-k: keep the fewest entries whose "
             "probability mass reaches it.")] = None
    logits_save_top_p_min_k: Annotated[int, Flag(
        help="Entries always kept per token when top-p masking is on.")] = 1
    logits_save_dir: Annotated[Optional[str], Flag(
        help="Directory the teacher's logits are written to.")] = None
    logits_save_dtype: Annotated[Literal["fp16", "bf16", "fp32"], Flag(
        help="On-disk dtype of the saved top-k log-probabilities.")] = "fp16"
    logits_load_dir: Annotated[Optional[str], Flag(
        help="Directory the student reads saved teacher logits from.")] = None
    logits_load_decode_threads: Annotated[int, Flag(
        help="Threads that decompress and decode cached logits.")] = 4
    logits_load_prefetch_factor: Annotated[int, Flag(
        help="Iterations of cached logits prefetched ahead of training (non-MSC storage).")] = 3
    logits_load_msc_prefetch_depth: Annotated[int, Flag(
        help="Whole tar shards prefetched into the MSC cache for object-storage logits.")] = 2
    logits_load_kd_loss_alpha: Annotated[float, Flag(
        help="Weight of the distillation loss: alpha * kd_loss + (1 - alpha) * lm_loss.")] = 1.0
    logits_load_ignore_errors: Annotated[bool, Flag(
        help="Log distillation-loss errors as warnings and fall back to the LM loss.")] = False
    logits_load_ignore_hash: Annotated[bool, Flag(
        help="Skip the dataset-hash check of cached logits (for logits saved with an older "
             "dataset hash).")] = False
