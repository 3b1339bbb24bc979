"""The logits-distillation checks, one small function each."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def saving_needs_top_k(config: Draft) -> None:
    """The saver keeps only the top-k logits, so k must be chosen."""
    if config.logits_save_dir is not None and config.logits_save_top_k is None:
        config.error(
            "--logits-save-dir requires --logits-save-top-k",
            flags=("logits_save_dir", "logits_save_top_k"),
            hint="add --logits-save-top-k (e.g. 128)")


def saving_needs_async_save(config: Draft) -> None:
    """Logits are flushed as an async request of the checkpoint queue."""
    if config.logits_save_dir is not None and not config.get("async_save", False):
        config.error(
            "--logits-save-dir requires --async-save: logits are written through the "
            "asynchronous checkpoint queue",
            flags=("logits_save_dir", "--async-save"),
            hint="add --async-save and --use-persistent-ckpt-worker (async saving is turned "
                 "off without the persistent worker)")


def saving_without_frozen_teacher(config: Draft) -> None:
    """Dumping logits from a model that is still training is allowed but unusual."""
    if config.logits_save_dir is not None and not config.get("freeze_all_layers", False):
        config.warn(
            "--logits-save-dir without --freeze-all-layers: the model keeps training while "
            "its logits are saved; add --freeze-all-layers for a frozen-teacher dump",
            flags=("logits_save_dir", "--freeze-all-layers"))


def saving_excludes_batch_rampup(config: Draft) -> None:
    """Saved logits are indexed by sample and iteration, assuming a fixed global batch."""
    if config.logits_save_dir is not None and config.get("rampup_batch_size") is not None:
        config.error(
            "--logits-save-dir cannot be combined with --rampup-batch-size: saved logits map "
            "samples to iterations assuming a fixed global batch size",
            flags=("logits_save_dir", "--rampup-batch-size"),
            hint="drop --rampup-batch-size while saving logits")


def top_p_in_range(config: Draft) -> None:
    """Top-p is a probability mass in (0, 1]; Megatron does not check it, so only warn."""
    top_p = config.logits_save_top_p
    if config.logits_save_dir is not None and top_p is not None and not 0.0 < top_p <= 1.0:
        config.warn(
            f"--logits-save-top-p {top_p:g} is outside (0, 1], the range of a probability mass",
            flags=("logits_save_top_p",))


#: Every distillation check, in Megatron's order.
CHECKS: tuple[Callable[[Draft], None], ...] = (
    saving_needs_top_k,
    saving_needs_async_save,
    saving_without_frozen_teacher,
    saving_excludes_batch_rampup,
    top_p_in_range,
)
