"""Torch FSDP2: what it requires and what it turns off."""

from __future__ import annotations

FSDP2 = ("--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
         "--untie-embeddings-and-output-weights")


def test_a_well_formed_fsdp2_launch_resolves(problems, resolve):
    assert problems(*FSDP2) == []
    assert problems(*FSDP2, "--ckpt-format", "torch_dcp") == []
    assert resolve(*FSDP2).use_torch_fsdp2 is True


def test_old_torch_is_rejected_and_missing_torch_is_left_alone(problems):
    found = problems(*FSDP2, packages={"torch": "2.3.1"})
    assert found == ["--use-torch-fsdp2 requires torch >= 2.4.0, found 2.3.1"]
    assert problems(*FSDP2, packages={"torch": None}) == []


def test_pipeline_parallelism_is_rejected(problems):
    found = problems(*FSDP2, "--pipeline-model-parallel-size", "2")
    assert found == ["--use-torch-fsdp2 is not supported with pipeline parallelism "
                     "(--pipeline-model-parallel-size 2)"]


def test_expert_parallelism_is_rejected(problems):
    found = problems(*FSDP2, "--expert-model-parallel-size", "4")
    assert found == ["--use-torch-fsdp2 is not supported with expert parallelism "
                     "(--expert-model-parallel-size 4)"]


def test_gradient_accumulation_fusion_is_rejected(problems):
    found = problems("--use-torch-fsdp2", "--untie-embeddings-and-output-weights")
    assert found == ["--use-torch-fsdp2 does not support gradient accumulation fusion"]


def test_checkpoint_format_must_be_torch_dist_or_dcp(problems):
    found = problems(*FSDP2, "--ckpt-format", "torch")
    assert found == ["--use-torch-fsdp2 cannot save --ckpt-format torch"]


def test_tied_embeddings_are_rejected(problems):
    found = problems("--use-torch-fsdp2", "--no-gradient-accumulation-fusion")
    assert found == ["--use-torch-fsdp2 needs separate input embedding and output weights"]


def test_fp16_is_rejected(problems):
    assert problems(*FSDP2, "--fp16") == ["--use-torch-fsdp2 does not support --fp16 yet"]


def test_single_cuda_connection_is_rejected(problems):
    found = problems(*FSDP2, env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    assert found == ["--use-torch-fsdp2 needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, "
                     "found 1"]
    assert problems(*FSDP2, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"}) == []


def test_every_problem_is_reported_at_once(problems):
    found = problems("--use-torch-fsdp2", "--pipeline-model-parallel-size", "2", "--fp16",
                     env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    assert len(found) == 5


def test_fp8_param_gather_is_turned_off_with_te2(resolve):
    resolved = resolve(*FSDP2, "--fp8-param-gather")
    assert resolved.fp8_param_gather is False
    assert resolved.source("fp8_param_gather").plugin == "fsdp"
    assert any("--fp8-param-gather is turned off" in w.message for w in resolved.warnings)


def test_fp8_param_gather_is_kept_with_te1(resolve):
    resolved = resolve(*FSDP2, "--fp8-param-gather", packages={"transformer_engine": "1.14"})
    assert resolved.fp8_param_gather is True


def test_fp4_param_gather_needs_te_2_7(resolve):
    assert resolve(*FSDP2, "--fp4-param-gather").fp4_param_gather is True
    old = resolve(*FSDP2, "--fp4-param-gather", packages={"transformer_engine": "2.5.0"})
    assert old.fp4_param_gather is False


def test_stream_priorities_for_fsdp2(resolve):
    assert resolve(*FSDP2).high_priority_stream_groups == ["dp_cp"]
    assert resolve("--high-priority-stream-groups", "dp_cp").high_priority_stream_groups == [
        "dp_cp"]
    assert resolve().high_priority_stream_groups == []
