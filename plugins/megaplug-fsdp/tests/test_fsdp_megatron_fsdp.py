"""Megatron-FSDP: derived settings and what it rules out."""

from __future__ import annotations

from megaplug import TorchDType

MFSDP = ("--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor")


def test_a_well_formed_launch_derives_the_legacy_alias(resolve):
    resolved = resolve(*MFSDP)
    assert resolved.use_custom_fsdp is True
    assert resolved.source("use_custom_fsdp").plugin == "fsdp"


def test_v1_turns_on_the_distributed_optimizer(resolve):
    resolved = resolve(*MFSDP)
    assert resolved.use_distributed_optimizer is True
    assert resolved.source("use_distributed_optimizer").inputs == ("use_megatron_fsdp",)
    assert any("--use-distributed-optimizer is turned on" in w.message
               for w in resolved.warnings)


def test_v1_derivation_runs_before_freezing_turns_it_off(resolve):
    assert resolve(*MFSDP, "--freeze-all-layers").use_distributed_optimizer is False


def test_v2_rejects_the_distributed_optimizer(problems, resolve):
    found = problems(*MFSDP, "--megatron-fsdp-version", "2", "--use-distributed-optimizer")
    assert found == ["--megatron-fsdp-version 2 cannot be combined with "
                     "--use-distributed-optimizer"]
    assert resolve(*MFSDP, "--megatron-fsdp-version", "2").use_distributed_optimizer is False


def test_v2_check_sees_the_optimizer_as_given(problems):
    # Megatron checks before --freeze-all-layers turns the distributed optimizer off.
    found = problems(*MFSDP, "--megatron-fsdp-version", "2", "--use-distributed-optimizer",
                     "--freeze-all-layers")
    assert len(found) == 1


def test_mxfp8_grad_buffer_reuse_is_turned_off(resolve):
    resolved = resolve(*MFSDP, "--reuse-grad-buf-for-mxfp8-param-ag")
    assert resolved.reuse_grad_buf_for_mxfp8_param_ag is False


def test_single_grouped_moe_parameters_are_rejected(problems):
    assert problems(*MFSDP, "--moe-single-grouped-weight") == [
        "--use-megatron-fsdp does not support --moe-single-grouped-weight yet"]
    assert problems(*MFSDP, "--moe-single-grouped-bias") == [
        "--use-megatron-fsdp does not support --moe-single-grouped-bias yet"]


def test_weight_hash_check_needs_replicated_parameters(problems):
    found = problems(*MFSDP, "--check-weight-hash-across-dp-replicas-interval", "10")
    assert found == ["--check-weight-hash-across-dp-replicas-interval cannot be used when "
                     "parameters are sharded (optim_grads_params)"]
    assert problems(*MFSDP, "--check-weight-hash-across-dp-replicas-interval", "10",
                    "--data-parallel-sharding-strategy", "optim_grads") == []


def test_expert_sharding_strategy_counts_too(problems):
    found = problems(*MFSDP, "--check-weight-hash-across-dp-replicas-interval", "10",
                     "--data-parallel-sharding-strategy", "optim",
                     "--expert-data-parallel-sharding-strategy", "optim_grads_params")
    assert len(found) == 1


def test_gradient_accumulation_fusion_gets_a_warning(resolve):
    resolved = resolve(*MFSDP)
    assert any("gradient accumulation fusion" in w.message for w in resolved.warnings)
    quiet = resolve(*MFSDP, "--no-gradient-accumulation-fusion")
    assert not any("gradient accumulation fusion" in w.message for w in quiet.warnings)


def test_meta_device_init_is_rejected_without_sharding(problems):
    found = problems(*MFSDP, "--init-model-with-meta-device",
                     "--data-parallel-sharding-strategy", "no_shard")
    assert found == ["--init-model-with-meta-device is neither supported nor needed with the "
                     "no_shard sharding strategy"]
    assert problems(*MFSDP, "--init-model-with-meta-device") == []


def test_single_cuda_connection_is_rejected(problems):
    found = problems(*MFSDP, env={"CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    assert found == ["--use-megatron-fsdp needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, "
                     "found 1"]


def test_checkpoint_format_must_be_fsdp_dtensor(problems):
    assert problems("--use-megatron-fsdp") == [
        "--use-megatron-fsdp saves checkpoints only as --ckpt-format fsdp_dtensor, not "
        "torch_dist"]


def test_nccl_user_buffers_turn_on_double_buffer_and_registration(resolve):
    resolved = resolve(*MFSDP, "--use-nccl-ub")
    assert resolved.fsdp_double_buffer is True and resolved.fsdp_manual_registration is True
    assert resolve(*MFSDP).fsdp_double_buffer is False


def test_max_pool_allocator_turns_on_double_buffer(resolve):
    assert resolve(*MFSDP, "--megatron-fsdp-max-pool-double-buffer").fsdp_double_buffer is True
    # Without Megatron-FSDP the allocator flag changes nothing.
    assert resolve("--megatron-fsdp-max-pool-double-buffer").fsdp_double_buffer is False


def test_stream_priorities_only_on_blackwell(resolve):
    assert resolve(*MFSDP).high_priority_stream_groups == []
    blackwell = resolve(*MFSDP, "--expert-model-parallel-size", "2",
                        device_capability=(10, 0))
    assert blackwell.high_priority_stream_groups == ["dp_cp", "ep_dp"]


def test_dtypes_are_mapped_with_megatron_fsdp(resolve):
    resolved = resolve(*MFSDP, "--megatron-fsdp-grad-comm-dtype", "bf16")
    assert resolved.megatron_fsdp_grad_comm_dtype == TorchDType("bfloat16")
