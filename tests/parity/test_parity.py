"""Every shared Megatron parity case resolves to exactly what Megatron resolved, and every
case Megatron rejects, megaplug rejects for Megatron's reason."""

from __future__ import annotations

import json

import pytest

from parity import PARITY_DIR, case_files, concerned_names, reason_mismatch, run_case

CASES = case_files()
ERROR_CASES = [p for p in CASES if json.loads(p.read_text())["expect"] == "error"]


def test_parity_cases_are_present():
    assert CASES, f"no parity cases found under {PARITY_DIR}"
    assert ERROR_CASES, "no parity case that Megatron rejects"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_parity_case(path):
    outcome = run_case(path)
    assert outcome.ok, "\n".join(outcome.mismatches)
    if outcome.expect == "error":
        # not merely rejected because some other rule also fired: one problem must name a
        # setting that Megatron's own error is about
        mismatch = reason_mismatch(json.loads(path.read_text()), outcome.problems)
        assert mismatch is None, mismatch


@pytest.mark.parametrize("message, names", [
    ("world size (8) is not divisible by total_model_size (total_model_size=64)",
     {"world_size", "total_model_size"}),
    ("Number of experts should be a multiple of expert model parallel_size.",
     {"num_experts", "expert_model_parallel_size"}),
    ("When interleaved schedule is used, pipeline-model-parallel size should be greater than 1",
     {"pipeline_model_parallel_size"}),
    ("number of layers per pipeline stage must be divisible number of layers per virtual "
     "pipeline stage", {"num_layers_per_virtual_pipeline_stage"}),
    ("AssertionError (no message) at megatron/training/arguments.py:1332 in validate_args: "
     "assert args.hidden_size % args.num_attention_heads == 0",
     {"hidden_size", "num_attention_heads"}),
    ("argument --ckpt-format: invalid choice: 'NONE' (choose from 'torch', 'torch_dist')",
     {"ckpt_format"}),
    ("--deterministic-mode requires: tp_comm_overlap=False (got True).",
     {"deterministic_mode", "tp_comm_overlap"}),
    ("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.", {"cuda_device_max_connections"}),
])
def test_the_settings_an_error_concerns_are_read_off_its_message(message, names):
    assert names <= concerned_names(message)


def test_only_the_longest_spelling_of_a_setting_counts():
    found = concerned_names("Number of experts should be a multiple of expert model "
                            "parallel_size; number of layers per virtual pipeline stage")
    assert "model_parallel_size" not in found and "num_layers" not in found


def test_ordinary_words_concern_no_setting():
    assert concerned_names("the batch must be divisible by the size of the model") == set()


@pytest.mark.parametrize("path", ERROR_CASES, ids=[p.stem for p in ERROR_CASES])
def test_every_megatron_error_concerns_some_setting(path):
    """The rule reads a setting off every shared error, so the reason check never passes
    vacuously."""
    assert concerned_names(json.loads(path.read_text())["megatron_error"])


def test_a_rejection_for_another_reason_is_caught():
    from megaplug import Problem

    case = {"megatron_error": "Number of experts should be a multiple of expert model "
                              "parallel_size."}
    unrelated = Problem("--fp16 and --bf16 are both set", ("--fp16", "--bf16"), "pick one")
    related = Problem("--num-experts 6 is not a multiple of --expert-model-parallel-size 4",
                      ("--num-experts", "--expert-model-parallel-size"), "use 8")
    assert "no problem names a setting" in reason_mismatch(case, [unrelated])
    assert reason_mismatch(case, [unrelated, related]) is None
