"""Checks that concern both FSDP implementations, and FSDP switched off."""

from __future__ import annotations

import pytest

import megaplug

FSDP2 = ("--use-torch-fsdp2", "--no-gradient-accumulation-fusion",
         "--untie-embeddings-and-output-weights")


def test_fsdp_dtensor_needs_megatron_fsdp(problems):
    assert problems("--ckpt-format", "fsdp_dtensor") == [
        "--ckpt-format fsdp_dtensor is tested only with Megatron-FSDP"]


def test_manual_registration_needs_megatron_fsdp_and_nccl_ub(problems):
    found = problems("--fsdp-manual-registration")
    assert found == ["--fsdp-manual-registration works only with --use-megatron-fsdp",
                     "--fsdp-manual-registration works only with --use-nccl-ub"]
    assert problems("--fsdp-manual-registration", "--use-megatron-fsdp", "--use-nccl-ub",
                    "--ckpt-format", "fsdp_dtensor") == []


def test_without_fsdp_nothing_is_derived(resolve):
    resolved = resolve("--use-distributed-optimizer", "--fp8-param-gather", "--use-nccl-ub")
    assert resolved.fp8_param_gather is True
    assert resolved.fsdp_double_buffer is False
    assert "use_custom_fsdp" not in resolved


def test_blocked_plugin_flags_name_the_plugin(make_kernel):
    kernel = make_kernel(block=("fsdp",))
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve(["--use-megatron-fsdp"], environ={})
    [problem] = info.value.problems
    assert problem.message == ("--use-megatron-fsdp belongs to plugin 'fsdp', which is "
                               "blocked: blocked by -p no: / MEGAPLUG_DISABLE")
    assert "-p no:fsdp" in problem.hint


def test_blocked_entry_point_rejects_its_flags():
    kernel, rest = megaplug.load(["-p", "no:fsdp", "--use-torch-fsdp2"])
    assert kernel.plugins.records["fsdp"].status == "blocked"
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve(rest, environ={})
    assert any(p.message.startswith("--use-torch-fsdp2 belongs to plugin 'fsdp'")
               for p in info.value.problems)
