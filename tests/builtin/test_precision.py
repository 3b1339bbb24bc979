"""The precision plugin: parameter dtype, fp8/fp4, loss scaling and gradient precision."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import messages, problems, resolve, warnings_of  # noqa: E402

from megaplug import TorchDType  # noqa: E402
from megaplug.values._encoding import encode  # noqa: E402


# -- parameter dtype ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv, dtype", [([], "torch.float32"), (["--fp16"], "torch.float16"),
                                         (["--bf16"], "torch.bfloat16")])
def test_params_dtype(argv, dtype):
    resolved = resolve(argv)
    assert isinstance(resolved.params_dtype, TorchDType)
    assert str(resolved.params_dtype) == dtype


def test_fp16_and_bf16_exclude_each_other():
    found = problems(["--fp16", "--bf16"])
    assert [(p.plugin, p.message) for p in found] == [
        ("precision", "--fp16 and --bf16 cannot be used together")]


# -- loss scaling and the NaN check ------------------------------------------------------------


def test_dynamic_loss_scaling_turns_off_the_nan_check():
    resolved = resolve(["--fp16"])
    assert resolved.check_for_nan_in_loss_and_grad is False
    assert any("dynamic loss scaling" in w for w in warnings_of(resolved))


def test_static_loss_scale_keeps_the_nan_check():
    resolved = resolve(["--fp16", "--loss-scale", "1024"])
    assert resolved.check_for_nan_in_loss_and_grad is True
    assert resolved.loss_scale == 1024.0


def test_loss_scaling_defaults():
    resolved = resolve()
    assert (resolved.initial_loss_scale, resolved.min_loss_scale) == (2**32, 1.0)
    assert (resolved.loss_scale_window, resolved.hysteresis) == (1000, 2)


# -- gradient accumulation precision -----------------------------------------------------------


def test_bf16_accumulates_gradients_in_fp32():
    resolved = resolve(["--bf16"])
    assert resolved.accumulate_allreduce_grads_in_fp32 is True
    assert resolved.source("accumulate_allreduce_grads_in_fp32").plugin == "precision"
    assert resolve().accumulate_allreduce_grads_in_fp32 is False


def test_grad_reduce_in_bf16_keeps_bf16_reduction():
    resolved = resolve(["--bf16", "--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32"])
    assert resolved.accumulate_allreduce_grads_in_fp32 is False


def test_bf16_main_grads_are_not_accumulated_in_fp32():
    assert (resolve(["--bf16", "--main-grads-dtype", "bf16"]).accumulate_allreduce_grads_in_fp32
            is False)
    found = problems(["--bf16", "--main-grads-dtype", "bf16",
                      "--accumulate-allreduce-grads-in-fp32"])
    assert [p.message for p in found] == [
        "--accumulate-allreduce-grads-in-fp32 needs fp32 main gradients, but --main-grads-dtype "
        "is bfloat16"]


def test_fp32_accumulation_turns_off_the_fp32_accumulating_reduce_scatter():
    resolved = resolve(["--bf16", "--ddp-reduce-scatter-with-fp32-accumulation"])
    assert resolved.ddp_reduce_scatter_with_fp32_accumulation is False
    assert sum("already reduces in fp32" in w for w in warnings_of(resolved)) == 1
    kept = resolve(["--bf16", "--grad-reduce-in-bf16",
                    "--ddp-reduce-scatter-with-fp32-accumulation"])
    assert kept.ddp_reduce_scatter_with_fp32_accumulation is True


# -- softmax and output dtypes ---------------------------------------------------------------------


def test_query_key_layer_scaling_computes_softmax_in_fp32():
    assert resolve(["--apply-query-key-layer-scaling"]).attention_softmax_in_fp32 is True
    assert resolve().attention_softmax_in_fp32 is False
    assert resolve(["--attention-softmax-in-fp32"]).attention_softmax_in_fp32 is True


def test_output_dtypes_become_torch_dtypes():
    resolved = resolve(["--output-logit-dtype", "fp32",
                        "--mamba-training-ssm-states-dtype", "bf16"])
    assert encode(resolved.logit_dtype) == "torch.float32"
    assert encode(resolved.mamba_training_ssm_states_dtype) == "torch.bfloat16"
    assert resolve().logit_dtype is None


# -- fp8 / fp4 -----------------------------------------------------------------------------------


def test_fp8_defaults_and_format():
    resolved = resolve(["--fp8-format", "hybrid"])
    assert (resolved.fp8, resolved.fp8_recipe, resolved.fp8_wgrad) == ("hybrid", "delayed", True)
    assert resolve(["--no-fp8-wgrad"]).fp8_wgrad is False


def test_fp4_and_fp8_exclude_each_other():
    assert "--fp4-format and --fp8-format cannot be used together" in messages(
        ["--fp4-format", "e2m1", "--fp8-format", "e4m3"])


def test_fp4_needs_transformer_engine_2_7():
    assert resolve(["--fp4-format", "e2m1"]).fp4 == "e2m1"
    assert messages(["--fp4-format", "e2m1"], packages={"transformer_engine": "2.6.0"}) == [
        "--fp4-format (NVFP4 block scaling) requires transformer_engine >= 2.7.0.dev0, found 2.6.0"]
    assert messages(["--fp4-format", "e2m1"], packages={"transformer_engine": None}) == [
        "--fp4-format (NVFP4 block scaling) requires transformer_engine >= 2.7.0.dev0, "
        "not installed"]


def test_low_precision_param_gather_needs_sharded_parameters():
    found = messages(["--fp8-format", "e4m3", "--fp8-param-gather"])
    assert found == ["--fp8-param-gather needs sharded parameters: --use-distributed-optimizer, "
                     "or a fully sharded data-parallel implementation"]
    assert resolve(["--fp8-format", "e4m3", "--fp8-param-gather", "--use-distributed-optimizer"])


def test_fp4_param_gather_needs_fp4():
    assert messages(["--fp4-param-gather", "--use-distributed-optimizer"]) == [
        "--fp4-param-gather needs --fp4-format"]
    assert resolve(["--fp4-param-gather", "--use-distributed-optimizer", "--fp4-format", "e2m1"])


def test_mxfp8_inference_layers_need_flashinfer():
    argv = ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--transformer-impl",
            "inference_optimized"]
    assert messages(argv) == ["--fp8-recipe mxfp8 with --transformer-impl inference_optimized "
                              "requires flashinfer >= 0.6.4, not installed"]
    assert resolve(argv, packages={"flashinfer": "0.6.4"})


def test_fp16_cross_entropy_needs_fp16():
    assert messages(["--fp16-lm-cross-entropy"]) == ["--fp16-lm-cross-entropy needs --fp16"]
    assert resolve(["--fp16-lm-cross-entropy", "--fp16"]).fp16_lm_cross_entropy


def test_fp32_residual_needs_half_precision():
    assert messages(["--fp32-residual-connection"]) == [
        "--fp32-residual-connection needs --fp16 or --bf16"]
    assert resolve(["--fp32-residual-connection", "--bf16"])
