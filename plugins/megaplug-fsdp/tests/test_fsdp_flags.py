"""The fsdp plugin's flags match Megatron's parser, and parse as Megatron's do."""

from __future__ import annotations

import pytest

from megaplug import TorchDType


def test_defaults_match_megatron(resolve):
    resolved = resolve()
    assert resolved.use_megatron_fsdp is False and resolved.use_torch_fsdp2 is False
    assert resolved.megatron_fsdp_version == 1
    assert resolved.data_parallel_sharding_strategy == "optim_grads_params"
    assert resolved.outer_dp_sharding_strategy == "no_shard"
    assert resolved.expert_data_parallel_sharding_strategy is None
    assert resolved.torch_fsdp2_reshard_after_forward is True
    assert resolved.megatron_fsdp_padded_shards is True
    assert resolved.suggested_communication_unit_size is None
    assert "use_custom_fsdp" not in resolved


def test_flag_spellings_actions_and_types(kernel):
    spec = kernel.table.by_dest["torch_fsdp2_reshard_after_forward"][0]
    assert spec.option_strings == ("--torch-fsdp2-no-reshard-after-forward",)
    assert spec.action == "store_false"
    version = kernel.table.by_dest["megatron_fsdp_version"][0]
    assert version.type is int and version.choices == (1, 2)
    main_params = kernel.table.by_dest["megatron_fsdp_main_params_dtype"][0]
    assert main_params.type is None and main_params.choices == ("fp32", "bf16", "fp16", "auto")
    padded = kernel.table.by_dest["megatron_fsdp_padded_shards"][0]
    assert padded.option_strings == ("--no-megatron-fsdp-padded-shards",)


def test_values_parse(resolve):
    resolved = resolve("--torch-fsdp2-no-reshard-after-forward", "--megatron-fsdp-version", "2",
                       "--suggested-communication-unit-size", "400000000",
                       "--outer-dp-sharding-strategy", "optim",
                       "--expert-outer-dp-sharding-strategy", "no_shard",
                       "--no-megatron-fsdp-padded-shards", "--hfsdp-param-gather-overlap")
    assert resolved.torch_fsdp2_reshard_after_forward is False
    assert resolved.megatron_fsdp_version == 2
    assert resolved.suggested_communication_unit_size == 400000000
    assert resolved.outer_dp_sharding_strategy == "optim"
    assert resolved.expert_outer_dp_sharding_strategy == "no_shard"
    assert resolved.megatron_fsdp_padded_shards is False
    assert resolved.hfsdp_param_gather_overlap is True


@pytest.mark.parametrize("argv, fragment", [
    (("--megatron-fsdp-version", "3"), "--megatron-fsdp-version"),
    (("--data-parallel-sharding-strategy", "full"), "--data-parallel-sharding-strategy"),
    (("--megatron-fsdp-grad-comm-dtype", "fp8"), "--megatron-fsdp-grad-comm-dtype"),
])
def test_bad_values_are_rejected(resolve, argv, fragment):
    import megaplug

    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*argv)
    assert any(fragment in p.message for p in info.value.problems)


def test_dtype_flags_become_torch_dtypes(resolve):
    resolved = resolve("--megatron-fsdp-main-params-dtype", "bf16",
                       "--megatron-fsdp-main-grads-dtype", "fp32")
    assert resolved.megatron_fsdp_main_params_dtype == TorchDType("bfloat16")
    assert resolved.megatron_fsdp_main_grads_dtype == TorchDType("float32")
    assert resolved.megatron_fsdp_grad_comm_dtype is None  # 'auto'
    assert str(resolved.megatron_fsdp_main_params_dtype) == "torch.bfloat16"


def test_default_main_params_dtype_is_float32(resolve):
    assert resolve().megatron_fsdp_main_params_dtype == TorchDType("float32")
