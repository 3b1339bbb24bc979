"""Distillation checks against the real core plugins (async save, freezing, ramp-up)."""

from __future__ import annotations

from typing import Sequence

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
TARGET = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                    device_capability=(9, 0))
SAVING = ["--logits-save-dir", "/tmp/logits", "--logits-save-top-k", "64",
          "--save", "/tmp/ckpt", "--save-interval", "100", "--ckpt-format", "torch_dist",
          "--async-save", "--use-persistent-ckpt-worker", "--freeze-all-layers"]


def outcome(extra: Sequence[str], base: Sequence[str] = DENSE_GPT,
            ) -> tuple[list[megaplug.Problem], list[str]]:
    try:
        resolved = megaplug.resolve([*base, *extra], environ=ENVIRON, target=TARGET)
    except megaplug.ConfigError as error:
        return list(error.problems), []
    return [], [str(w) for w in resolved.warnings if w.plugin == "distillation"]


def test_teacher_dump_resolves() -> None:
    assert outcome(SAVING) == ([], [])


def test_async_save_turned_off_without_persistent_worker() -> None:
    # Without the persistent worker the checkpointing plugin turns --async-save off,
    # and saving logits then has no asynchronous queue.
    [problem], _ = outcome([a for a in SAVING if a != "--use-persistent-ckpt-worker"])
    assert problem.plugin == "distillation" and "--async-save" in problem.message


def test_unfrozen_teacher_warns() -> None:
    problems, [warning] = outcome([a for a in SAVING if a != "--freeze-all-layers"])
    assert problems == [] and "--freeze-all-layers" in warning


def test_rampup_is_refused_while_saving() -> None:
    # Ramp-up needs sample-based training; the same run without saving logits is valid.
    by_samples = [*DENSE_GPT[:-4], "--train-samples", "1000", "--lr", "1e-4"]
    rampup = ["--rampup-batch-size", "16", "16", "800", "--global-batch-size", "64"]
    assert outcome(rampup, by_samples) == ([], [])
    problems, _ = outcome(SAVING + rampup, by_samples)
    assert [p.plugin for p in problems] == ["distillation"]
    assert "--rampup-batch-size" in problems[0].message


def test_student_loading_needs_no_checks() -> None:
    assert outcome(["--logits-load-dir", "/tmp/logits", "--logits-load-ignore-hash"]) == ([], [])
