"""The logging plugin: its flags and its checks on what gets logged."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import messages, resolve, warnings_of  # noqa: E402


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
    resolved = resolve(["--no-barrier-with-level-1-timing",
                        "--disable-log-loss-scale-to-tensorboard",
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
    assert ("[logging] --validation-set-names has no effect without --multiple-validation-sets"
            in notes)
    assert "[logging] --otel-service-name has no effect without --otel-enabled" in notes
    assert "[logging] --log-timers-to-tensorboard has no effect without --tensorboard-dir" in notes
