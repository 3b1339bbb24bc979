"""The training plugin together with every installed plugin (the real parallel layout)."""

from __future__ import annotations

import pytest

import megaplug

LAUNCH = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
          "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
          "--train-iters", "10", "--lr", "1e-4"]
ENV = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_ALGO": "Ring"}


@pytest.fixture(scope="module")
def kernel():
    loaded, _ = megaplug.load([], environ={})
    broken = [r.name for r in loaded.plugins.records.values() if r.status == "broken"]
    assert broken == [], f"plugins failed to load: {broken}"
    assert "parallel" in loaded.plugins.order
    return loaded


def _resolve(kernel, *argv: str) -> megaplug.Resolved:
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=(9, 0))
    return kernel.resolve([*LAUNCH, *argv], environ=ENV, target=target)


def test_global_batch_follows_the_real_data_parallel_size(kernel):
    resolved = _resolve(kernel, "--tensor-model-parallel-size", "2")
    assert resolved.data_parallel_size == 4
    assert (resolved.global_batch_size, resolved.eval_global_batch_size) == (8, 8)


def test_eval_batch_divisibility_with_the_real_layout(kernel):
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(kernel, "--global-batch-size", "24")
    assert any(p.plugin == "training" and "--global-batch-size 24 must be divisible by "
               "--micro-batch-size 2 x batch-parallel size 8" in p.message
               for p in info.value.problems)


def test_eval_batch_divisibility_names_the_gtp_remat_factor(kernel):
    """8 ranks as 1 data-parallel replica x 8 GTP remat ranks: each evaluation step needs a
    multiple of 8 samples, and the message names the settings the 8 is made of, as
    Megatron's does (its own test matches ``gtp_weight_remat_size``)."""
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(kernel, "--micro-batch-size", "1", "--tensor-parallel-num-weight-shards", "8",
                 "--eval-global-batch-size", "4", "--eval-micro-batch-size", "1")
    [problem] = [p for p in info.value.problems if "--eval-global-batch-size" in p.flags]
    assert problem.message == (
        "--eval-global-batch-size 4 must be divisible by --eval-micro-batch-size 1 x "
        "batch-parallel size 8 (data_parallel_size 1 x gtp_weight_remat_size 8) = 8")
    resolved = _resolve(kernel, "--micro-batch-size", "1",
                        "--tensor-parallel-num-weight-shards", "8",
                        "--eval-global-batch-size", "8", "--eval-micro-batch-size", "1")
    assert (resolved.data_parallel_size, resolved.gtp_weight_remat_size) == (1, 8)


def test_deterministic_mode_reads_tp_comm_overlap_from_parallel(kernel):
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(kernel, "--deterministic-mode", "--tensor-model-parallel-size", "2",
                 "--sequence-parallel", "--tp-comm-overlap")
    assert any(p.plugin == "training" and "tp_comm_overlap=False (got True)" in p.message
               for p in info.value.problems)


def test_skip_train_lifts_the_iteration_and_sample_schedule_checks(kernel):
    mixed = ("--lr-decay-samples", "100", "--train-samples", "1000")
    with pytest.raises(megaplug.ConfigError):
        _resolve(kernel, *mixed)
    resolved = _resolve(kernel, *mixed, "--skip-train")
    assert resolved.skip_train is True and resolved.train_samples == 1000
