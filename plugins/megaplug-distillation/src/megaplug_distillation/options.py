"""The logits-distillation settings, spelled and defaulted as Megatron's group."""


from typing import Literal, Optional


from megaplug import Flag, options


@options
class DistillationOptions:
    """Flags for dumping a teacher's top logits and training a student on them."""

    logits_save_top_k: Optional[int] = Flag(
        default=None,
        help="Number of highest logits saved per token; required with --logits-save-dir.")
    logits_save_top_p: Optional[float] = Flag(
        default=None,
        help="Nucleus threshold in (0, 1] applied after top-k: keep the fewest entries whose "
             "probability mass reaches it.")
    logits_save_top_p_min_k: int = Flag(
        default=1,
        help="Entries always kept per token when top-p masking is on.")
    logits_save_dir: Optional[str] = Flag(
        default=None,
        help="Directory the teacher's logits are written to.")
    logits_save_dtype: Literal["fp16", "bf16", "fp32"] = Flag(
        default="fp16",
        help="On-disk dtype of the saved top-k log-probabilities.")
    logits_load_dir: Optional[str] = Flag(
        default=None,
        help="Directory the student reads saved teacher logits from.")
    logits_load_decode_threads: int = Flag(
        default=4,
        help="Threads that decompress and decode cached logits.")
    logits_load_prefetch_factor: int = Flag(
        default=3,
        help="Iterations of cached logits prefetched ahead of training (non-MSC storage).")
    logits_load_msc_prefetch_depth: int = Flag(
        default=2,
        help="Whole tar shards prefetched into the MSC cache for object-storage logits.")
    logits_load_kd_loss_alpha: float = Flag(
        default=1.0,
        help="Weight of the distillation loss: alpha * kd_loss + (1 - alpha) * lm_loss.")
    logits_load_ignore_errors: bool = Flag(
        default=False,
        help="Log distillation-loss errors as warnings and fall back to the LM loss.")
    logits_load_ignore_hash: bool = Flag(
        default=False,
        help="Skip the dataset-hash check of cached logits (for logits saved with an older "
             "dataset hash).")
