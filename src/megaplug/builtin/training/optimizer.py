"""Optimizer choice, frozen training and retired batch/warmup flags."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable

#: Optimizers Megatron has supported the longest; the others are "emerging".
_CLASSIC_OPTIMIZERS = ("adam", "sgd")
_EMERGING_CHECKPOINT_FORMATS = ("torch", "torch_dist")
#: The first Megatron release line with the layer-wise distributed optimizer; the two before
#: it (0.16, 0.17, the first with Muon) refuse Muon with the distributed optimizer.
LAYER_WISE_RELEASE = "0.18.0"


def normalize_retired_batch_size(config: Draft) -> None:
    """--batch-size is retired in favour of --micro-batch-size."""
    if config.batch_size is not None:
        config.error(f"--batch-size {config.batch_size} is no longer supported",
                     flags=("batch_size",),
                     hint=f"use --micro-batch-size {config.batch_size}")
    config.discard("batch_size")


def normalize_retired_warmup(config: Draft) -> None:
    """--warmup is retired in favour of the --lr-warmup-* flags."""
    if config.warmup is not None:
        config.error(f"--warmup {config.warmup} is no longer supported", flags=("warmup",),
                     hint="use --lr-warmup-fraction, --lr-warmup-iters or --lr-warmup-samples")
    config.discard("warmup")


def normalize_weight_decay_cond_type(config: Draft) -> None:
    """--no-weight-decay-cond-type apply_wd_to_qk_layernorm is the old spelling of
    --apply-wd-to-qk-layernorm; Megatron keeps the flag but clears it after translating."""
    if config.no_weight_decay_cond_type is None:
        return
    config.warn("--no-weight-decay-cond-type is deprecated; use --apply-wd-to-qk-layernorm",
                flags=("no_weight_decay_cond_type",))
    config.set("apply_wd_to_qk_layernorm", True, reason="--no-weight-decay-cond-type "
               "apply_wd_to_qk_layernorm", inputs=("no_weight_decay_cond_type",))
    config.set("no_weight_decay_cond_type", None, reason="translated to --apply-wd-to-qk-layernorm",
               inputs=("no_weight_decay_cond_type",))


def warn_dist_muon(config: Draft) -> None:
    """dist_muon still works but has a replacement."""
    if config.optimizer == "dist_muon":
        config.warn("--optimizer dist_muon is deprecated; use --optimizer muon with "
                    "--use-distributed-optimizer", flags=("optimizer",))


def derive_layer_wise_distribution(config: Draft) -> None:
    """Emerging optimizers shard their state layer by layer instead of element-wise.

    ``--use-distributed-optimizer`` with such an optimizer (and the retired ``dist_muon``)
    selects the layer-wise distributed optimizer in place of the element-wise one.
    """
    if config.env.megatron.before(LAYER_WISE_RELEASE):
        return  # (nor is the setting theirs: generated line facts leave it out there)
    optimizer = config.optimizer
    distributed = bool(config.get("use_distributed_optimizer"))
    if optimizer in _CLASSIC_OPTIMIZERS or not (distributed or optimizer == "dist_muon"):
        return
    config.set("use_layer_wise_distributed_optimizer", True,
               reason=f"--optimizer {optimizer} shards its state layer by layer",
               inputs=("optimizer", "use_distributed_optimizer"))
    if distributed:
        config.set("use_distributed_optimizer", False,
                   reason="replaced by the layer-wise distributed optimizer",
                   inputs=("optimizer",))


def derive_frozen_training(config: Draft) -> None:
    """Frozen layers have no optimizer state to shard or parameters to gather."""
    if not config.freeze_all_layers:
        return
    for dest, why in (("use_distributed_optimizer", "the distributed optimizer"),
                      ("overlap_param_gather", "overlapped parameter gathering")):
        if config.get(dest):
            config.warn(f"--freeze-all-layers turns off {why} ({config.spelling(dest)})",
                        flags=("freeze_all_layers", dest))
            config.set(dest, False, reason="all layers are frozen", inputs=("freeze_all_layers",))


def check_emerging_optimizer(config: Draft) -> None:
    """Optimizers beyond Adam and SGD save only torch checkpoints (and run only with Megatron
    DDP, which the FSDP plugin checks)."""
    optimizer = config.optimizer
    if optimizer in _CLASSIC_OPTIMIZERS:
        return
    if config.env.megatron.before(LAYER_WISE_RELEASE):
        if "muon" not in optimizer:
            return  # 0.17's lion: those releases check only the Muon family
        _check_early_muon(config)
    ckpt_format = config.get("ckpt_format")
    if ckpt_format is not None and ckpt_format not in _EMERGING_CHECKPOINT_FORMATS:
        config.error(f"--optimizer {optimizer} supports only --ckpt-format torch or torch_dist "
                     f"(got {ckpt_format})", flags=("optimizer", "ckpt_format"),
                     hint="use --ckpt-format torch_dist")


def _check_early_muon(config: Draft) -> None:
    """Megatron 0.16 and 0.17 run Muon only with Megatron DDP's own optimizer: not the
    distributed optimizer and (0.17: only ``muon``, ``dist_muon`` overlaps) without
    overlapped gradient reduction or parameter gathering. (Not with FSDP either: the fsdp
    plugin says so, as it does for every emerging optimizer.)"""
    optimizer = config.optimizer
    refused = ["use_distributed_optimizer"]
    if optimizer == "muon" or config.env.megatron.before("0.17.0"):
        refused += ["overlap_grad_reduce", "overlap_param_gather"]
    for dest in refused:
        if config.get(dest):
            config.error(f"--optimizer {optimizer} does not support {config.spelling(dest)} in "
                         f"Megatron {config.env.release_line('megatron_core')}",
                         flags=("optimizer", dest),
                         hint="Megatron 0.18 and later shard it layer by layer")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    normalize_retired_batch_size,
    normalize_retired_warmup,
    normalize_weight_decay_cond_type,
)

DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_layer_wise_distribution,
    derive_frozen_training,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    warn_dist_muon,
    check_emerging_optimizer,
)
