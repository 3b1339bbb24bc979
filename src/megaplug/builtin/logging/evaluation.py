"""Evaluation batch sizes and evaluation-only runs."""

from __future__ import annotations

from megaplug import Draft


def default_eval_batch_sizes(config: Draft) -> None:
    """Evaluation uses the training batch sizes unless given its own."""
    for dest, source in (("eval_global_batch_size", "global_batch_size"),
                         ("eval_micro_batch_size", "micro_batch_size")):
        value = config.get(source)
        if config[dest] is None and value is not None:
            config.set(dest, value, reason=f"same as {config.spelling(source)}",
                       inputs=(source,))


def skip_optimizer_state_when_not_training(config: Draft) -> None:
    """An evaluation-only run has no use for the optimizer state of the checkpoint."""
    if config.skip_train and config.get("no_load_optim", True) is not True:
        config.set("no_load_optim", True, reason="--skip-train", inputs=("skip_train",))
        config.warn("--skip-train: not loading the optimizer state (--no-load-optim)",
                    flags=("skip_train", "no_load_optim"))


def check_eval_batch_divisible(config: Draft) -> None:
    """Each evaluation step splits the global batch into whole micro batches per replica."""
    total, micro = config.eval_global_batch_size, config.eval_micro_batch_size
    replicas = config.get("data_parallel_size")
    if total is None or micro is None or replicas is None:
        return
    weight_shards = config.get("gtp_weight_remat_size", 1) or 1
    step = micro * replicas * weight_shards
    if step and total % step:
        config.error(f"eval global batch size {total} is not divisible by eval micro batch size "
                     f"{micro} x data-parallel size {replicas} x weight-remat size "
                     f"{weight_shards} (= {step})",
                     flags=("eval_global_batch_size", "eval_micro_batch_size",
                            "data_parallel_size"),
                     hint=f"use an --eval-global-batch-size that is a multiple of {step} (it "
                          "defaults to --global-batch-size), or a smaller "
                          "--eval-micro-batch-size")
