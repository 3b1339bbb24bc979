"""What each logging rule reports, whole: the message, every flag it names and the hint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import problems, resolve  # noqa: E402


def whole(reports) -> list[tuple]:
    return [(p.message, tuple(p.flags), p.hint) for p in reports]


def test_max_attention_logit_with_an_old_transformer_engine():
    assert whole(problems(["--log-max-attention-logit"],
                          packages={"transformer_engine": "2.8.0"})) == [
        ("--log-max-attention-logit requires transformer_engine >= 2.9.0, found 2.8.0",
         ("--log-max-attention-logit",),
         "upgrade Transformer Engine to 2.9 or newer, or drop the flag")]


@pytest.mark.parametrize("argv, expected", [
    (["--validation-set-names", "a"],
     ("--validation-set-names has no effect without --multiple-validation-sets",
      ("--validation-set-names", "--multiple-validation-sets"))),
    (["--otel-service-name", "svc"],
     ("--otel-service-name has no effect without --otel-enabled",
      ("--otel-service-name", "--otel-enabled"))),
    (["--otel-span-groups", "data"],
     ("--otel-span-groups has no effect without --otel-enabled",
      ("--otel-span-groups", "--otel-enabled"))),
    (["--log-timers-to-tensorboard", "--log-memory-to-tensorboard"],
     ("--log-timers-to-tensorboard, --log-memory-to-tensorboard has no effect without "
      "--tensorboard-dir",
      ("--log-timers-to-tensorboard", "--log-memory-to-tensorboard", "--tensorboard-dir"))),
])
def test_a_setting_without_its_switch_is_one_warning(argv, expected):
    assert [(w.message, tuple(w.flags)) for w in resolve(argv).warnings] == [expected]


@pytest.mark.parametrize("argv", [
    [],
    ["--validation-set-names", "a", "--multiple-validation-sets"],
    ["--otel-service-name", "svc", "--otel-span-groups", "data", "--otel-enabled"],
    ["--tensorboard-dir", "tb"],
    ["--log-timers-to-tensorboard", "--tensorboard-dir", "tb"],
])
def test_settings_with_their_switch_or_none_are_quiet(argv):
    assert resolve(argv).warnings == ()
