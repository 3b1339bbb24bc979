"""The logging plugin: evaluation batch sizes, evaluation-only runs and logging checks."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import messages, problems, resolve, warnings_of  # noqa: E402


def test_eval_batch_sizes_default_to_the_training_ones():
    resolved = resolve(["--global-batch-size", "16"], environ={"WORLD_SIZE": "2"})
    assert (resolved.eval_global_batch_size, resolved.eval_micro_batch_size) == (16, 2)
    assert resolved.source("eval_global_batch_size").inputs == ("global_batch_size",)


def test_eval_batch_sizes_follow_a_derived_global_batch_size():
    resolved = resolve([], environ={"WORLD_SIZE": "4"})
    assert resolved.global_batch_size == 8 and resolved.eval_global_batch_size == 8


def test_explicit_eval_batch_sizes_are_kept():
    resolved = resolve(["--eval-global-batch-size", "4", "--eval-micro-batch-size", "1"],
                       environ={"WORLD_SIZE": "2"})
    assert (resolved.eval_global_batch_size, resolved.eval_micro_batch_size) == (4, 1)


def test_eval_global_batch_must_split_into_micro_batches_per_replica():
    found = problems(["--global-batch-size", "32", "--eval-micro-batch-size", "8"],
                     environ={"WORLD_SIZE": "8"})
    assert [p.message for p in found] == [
        "eval global batch size 32 is not divisible by eval micro batch size 8 x data-parallel "
        "size 8 x weight-remat size 1 (= 64)"]
    assert found[0].plugin == "logging"
    assert "multiple of 64" in found[0].hint


def test_skip_train_stops_loading_the_optimizer_state():
    resolved = resolve(["--skip-train"])
    assert resolved.no_load_optim is True
    assert resolved.source("no_load_optim").plugin == "logging"
    assert any("not loading the optimizer state" in w for w in warnings_of(resolved))
    assert resolve([]).no_load_optim is False


def test_max_attention_logit_needs_transformer_engine_2_9():
    assert any("--log-max-attention-logit requires transformer_engine >= 2.9.0, found 2.8.0" in m
               for m in messages(["--log-max-attention-logit"],
                                 packages={"transformer_engine": "2.8.0"}))
    assert any("not installed" in m for m in messages(["--log-max-attention-logit"]))
    assert resolve(["--log-max-attention-logit"],
                   packages={"transformer_engine": "2.17.1"}).log_max_attention_logit is True


def test_malformed_numbers_are_rejected():
    assert any("--tensorboard-queue-size: invalid int value '0x10'" in m
               for m in messages(["--tensorboard-queue-size", "0x10"]))
    assert any("--timing-log-level: invalid choice" in m
               for m in messages(["--timing-log-level", "3"]))


def test_logging_defaults_and_spellings():
    resolved = resolve(["--no-barrier-with-level-1-timing", "--disable-log-loss-scale-to-tensorboard",
                        "--no-one-logger", "--validation-set-names", "a", "b",
                        "--multiple-validation-sets"])
    assert resolved.barrier_with_L1_time is False
    assert resolved.log_loss_scale_to_tensorboard is False
    assert resolved.enable_one_logger is False
    assert resolved.validation_set_names == ["a", "b"]
    defaults = resolve([])
    assert (defaults.timing_log_level, defaults.timing_log_option) == (0, "minmax")
    assert (defaults.eval_iters, defaults.log_interval) == (100, 100)
    assert defaults.one_logger_project == "megatron-lm"


def test_settings_without_their_switch_are_pointed_out():
    resolved = resolve(["--validation-set-names", "a", "--otel-service-name", "svc",
                        "--log-timers-to-tensorboard"])
    notes = warnings_of(resolved)
    assert "[logging] --validation-set-names has no effect without --multiple-validation-sets" in notes
    assert "[logging] --otel-service-name has no effect without --otel-enabled" in notes
    assert "[logging] --log-timers-to-tensorboard has no effect without --tensorboard-dir" in notes
