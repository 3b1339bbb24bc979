"""The training plugin: fusions, deterministic mode and optimizers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _training_stub import messages, problems, resolve, warnings  # noqa: E402

DETERMINISTIC_ENV = {"NCCL_ALGO": "Ring"}


# -- fusions ---------------------------------------------------------------------------


def test_bias_gelu_fusion_needs_linear_biases():
    assert resolve().bias_gelu_fusion is True
    assert resolve("--disable-bias-linear").bias_gelu_fusion is False


def test_rope_fusion_only_for_rope():
    assert resolve().apply_rope_fusion is False
    assert resolve("--position-embedding-type", "rope").apply_rope_fusion is True
    assert resolve("--use-rotary-position-embeddings").apply_rope_fusion is True
    assert resolve("--position-embedding-type", "rope", "--no-rope-fusion").apply_rope_fusion \
        is False


def test_dataloader_defaults_to_single():
    assert resolve().dataloader_type == "single"
    assert resolve("--dataloader-type", "cyclic").dataloader_type == "cyclic"


def test_persistent_layer_norm_needs_torch_1_11():
    assert resolve().no_persist_layer_norm is False
    assert resolve(packages={"torch": "1.10.0"}).no_persist_layer_norm is True
    assert resolve(packages={"torch": None}).no_persist_layer_norm is False


def test_nan_check_off_with_dynamic_loss_scaling():
    resolved = resolve("--fp16")
    assert resolved.check_for_nan_in_loss_and_grad is False
    assert "dynamic loss scaling" in warnings(resolved)
    assert resolve("--fp16", "--loss-scale", "1024").check_for_nan_in_loss_and_grad is True
    assert resolve().check_for_nan_in_loss_and_grad is True


def test_nan_check_off_with_fake_process_group():
    assert resolve("--fake-process-group").check_for_nan_in_loss_and_grad is False


def test_te_cross_entropy_needs_te_2_19():
    text = messages("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te")
    assert "needs Transformer Engine >= 2.19" in text and "found 2.17.1" in text
    # Megatron's own test matches its message on this phrase
    assert "Transformer Engine cross entropy loss fusion (--cross-entropy-fusion-impl te)" in text
    resolved = resolve("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te",
                       packages={"transformer_engine": "2.19.0"})
    assert resolved.cross_entropy_fusion_impl == "te"
    assert resolve("--cross-entropy-loss-fusion").cross_entropy_loss_fusion is True


# -- deterministic mode ----------------------------------------------------------------


def test_deterministic_mode_accepts_a_plain_launch():
    assert resolve("--deterministic-mode", env=DETERMINISTIC_ENV).deterministic_mode is True


def test_deterministic_mode_rejects_tp_comm_overlap():
    found = problems("--deterministic-mode", "--tp-comm-overlap", env=DETERMINISTIC_ENV)
    assert found[0].message == "--deterministic-mode requires: tp_comm_overlap=False (got True)"
    assert found[0].hint == "turn off --tp-comm-overlap, or drop --deterministic-mode"


def test_deterministic_mode_lists_every_violation():
    text = messages("--deterministic-mode", "--tp-comm-overlap", "--cross-entropy-loss-fusion",
                    env=DETERMINISTIC_ENV)
    assert "cross_entropy_loss_fusion=False (got True), tp_comm_overlap=False (got True)" in text


def test_deterministic_mode_allows_flash_attention():
    resolved = resolve("--deterministic-mode", "--use-flash-attn", env=DETERMINISTIC_ENV)
    assert resolved.use_flash_attn is True


@pytest.mark.parametrize("env", [{"NCCL_ALGO": "Ring,CollnetDirect"}, {"NCCL_ALGO": "^NVLS"},
                                 {"CUBLAS_WORKSPACE_CONFIG": ":16:8"},
                                 {"NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0"},
                                 {"MAMBA_DETERMINISTIC": "1"}, {}])
def test_deterministic_mode_accepts_reproducible_environments(env):
    assert resolve("--deterministic-mode", env=env).deterministic_mode is True


@pytest.mark.parametrize("env, text", [
    ({"NCCL_ALGO": "Tree"}, "NCCL_ALGO='Tree' is not a deterministic"),
    ({"NCCL_ALGO": "Ring,NVLS"}, "NCCL_ALGO='Ring,NVLS'"),
    ({"NCCL_ALGO": ""}, "NCCL_ALGO=''"),
    ({"NVTE_ALLOW_NONDETERMINISTIC_ALGO": "1"}, "NVTE_ALLOW_NONDETERMINISTIC_ALGO='1'"),
    ({"CUBLAS_WORKSPACE_CONFIG": ":4096:2"}, "CUBLAS_WORKSPACE_CONFIG=':4096:2'"),
    ({"MAMBA_DETERMINISTIC": "0"}, "MAMBA_DETERMINISTIC='0'"),
])
def test_deterministic_mode_rejects_nondeterministic_environments(env, text):
    assert text in messages("--deterministic-mode", env=env)
    assert resolve(env=env).deterministic_mode is False


# -- optimizers and frozen training ------------------------------------------------------


def test_emerging_optimizer_needs_torch_checkpoints():
    text = messages("--optimizer", "lion", "--ckpt-format", "fsdp_dtensor")
    assert "supports only --ckpt-format torch or torch_dist (got fsdp_dtensor)" in text
    assert resolve("--optimizer", "muon").optimizer == "muon"


def test_dist_muon_is_deprecated():
    assert "dist_muon is deprecated" in warnings(resolve("--optimizer", "dist_muon"))


def test_frozen_layers_turn_off_distributed_optimizer():
    resolved = resolve("--freeze-all-layers", "--use-distributed-optimizer",
                       "--overlap-param-gather")
    assert (resolved.use_distributed_optimizer, resolved.overlap_param_gather) == (False, False)
    assert "turns off the distributed optimizer" in warnings(resolved)


def test_optimizer_hyperparameters_pass_through():
    resolved = resolve("--adam-beta2", "0.95", "--clip-grad", "0.5", "--muon-tp-mode",
                       "blockwise", "--lion-beta1", "0.9")
    assert (resolved.adam_beta2, resolved.clip_grad, resolved.muon_tp_mode,
            resolved.lion_beta1) == (0.95, 0.5, "blockwise", 0.9)


def test_use_mcore_models_is_kept_with_a_warning():
    resolved = resolve("--use-mcore-models")
    assert resolved.deprecated_use_mcore_models is True
    assert "--use-mcore-models is deprecated" in warnings(resolved)


def test_muon_with_distributed_optimizer_is_layer_wise():
    resolved = resolve("--optimizer", "muon", "--use-distributed-optimizer")
    assert resolved.use_layer_wise_distributed_optimizer is True
    assert resolved.use_distributed_optimizer is False


def test_adam_keeps_the_element_wise_distributed_optimizer():
    resolved = resolve("--use-distributed-optimizer")
    assert (resolved.use_layer_wise_distributed_optimizer, resolved.use_distributed_optimizer) \
        == (False, True)
    assert resolve("--optimizer", "muon").use_layer_wise_distributed_optimizer is False


def test_dist_muon_is_layer_wise():
    assert resolve("--optimizer", "dist_muon").use_layer_wise_distributed_optimizer is True
