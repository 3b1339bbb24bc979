"""What each precision rule reports, whole: the message, every flag it names and the hint;
every warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import problems, resolve  # noqa: E402

from megaplug import PluginInfo, TorchDType, hookimpl  # noqa: E402

SHARDED = ("needs sharded parameters: --use-distributed-optimizer, or a fully sharded "
           "data-parallel implementation")


def whole(argv, **kwargs) -> list[tuple]:
    return [(p.message, tuple(p.flags), p.hint) for p in problems(argv, **kwargs)]


def warned(resolved) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings]


def provenance(resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, packages, expected", [
    (["--fp16", "--bf16"], None,
     ("--fp16 and --bf16 cannot be used together", ("--fp16", "--bf16"),
      "choose one parameter precision")),
    (["--fp4-format", "e2m1", "--fp8-format", "e4m3"], None,
     ("--fp4-format and --fp8-format cannot be used together", ("--fp4-format", "--fp8-format"),
      "choose one low-precision format")),
    (["--fp4-format", "e2m1"], {"transformer_engine": "2.6.0"},
     ("--fp4-format (NVFP4 block scaling) requires transformer_engine >= 2.7.0.dev0, found "
      "2.6.0", ("--fp4-format",), "upgrade Transformer Engine to 2.7 or later")),
    (["--fp8-format", "e4m3", "--fp8-param-gather"], None,
     (f"--fp8-param-gather {SHARDED}", ("--fp8-param-gather", "--use-distributed-optimizer"),
      "add --use-distributed-optimizer")),
    (["--fp4-format", "e2m1", "--fp4-param-gather"], None,
     (f"--fp4-param-gather {SHARDED}", ("--fp4-param-gather", "--use-distributed-optimizer"),
      "add --use-distributed-optimizer")),
    (["--fp4-param-gather", "--use-distributed-optimizer"], None,
     ("--fp4-param-gather needs --fp4-format", ("--fp4-param-gather", "--fp4-format"),
      "add --fp4-format e2m1, or drop --fp4-param-gather")),
    (["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--transformer-impl",
      "inference_optimized"], None,
     ("--fp8-recipe mxfp8 with --transformer-impl inference_optimized requires flashinfer >= "
      "0.6.4, not installed", ("--fp8-recipe", "--transformer-impl"),
      "install FlashInfer 0.6.4 or later, or use another fp8 recipe")),
    (["--fp16-lm-cross-entropy"], None,
     ("--fp16-lm-cross-entropy needs --fp16", ("--fp16-lm-cross-entropy", "--fp16"),
      "add --fp16 or drop --fp16-lm-cross-entropy")),
    (["--fp32-residual-connection"], None,
     ("--fp32-residual-connection needs --fp16 or --bf16",
      ("--fp32-residual-connection", "--fp16", "--bf16"),
      "add --bf16 (or --fp16); in fp32 training the residual is fp32 already")),
    (["--bf16", "--main-grads-dtype", "bf16", "--accumulate-allreduce-grads-in-fp32"], None,
     ("--accumulate-allreduce-grads-in-fp32 needs fp32 main gradients, but --main-grads-dtype "
      "is bfloat16", ("--accumulate-allreduce-grads-in-fp32", "--main-grads-dtype"),
      "use --main-grads-dtype fp32, or drop --accumulate-allreduce-grads-in-fp32")),
])
def test_each_problem_whole(argv, packages, expected):
    assert whole(argv, packages=packages) == [expected]


@pytest.mark.parametrize("argv, packages", [
    (["--fp4-format", "e2m1"], {"transformer_engine": "2.7.0"}),
    (["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--transformer-impl",
      "inference_optimized"], {"flashinfer": "0.6.4"}),
    (["--fp8-format", "e4m3", "--fp8-recipe", "delayed", "--transformer-impl",
      "inference_optimized"], None),
    (["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"], None),
    (["--fp4-format", "e2m1", "--fp4-param-gather", "--use-distributed-optimizer"], None),
    (["--fp16-lm-cross-entropy", "--fp16"], None),
    (["--fp32-residual-connection", "--fp16"], None),
    (["--bf16", "--main-grads-dtype", "fp32", "--accumulate-allreduce-grads-in-fp32"], None),
])
def test_near_misses_pass(argv, packages):
    assert whole(argv, packages=packages) == []


@pytest.mark.parametrize("argv, dtype", [([], "float32"), (["--fp16"], "float16"),
                                         (["--bf16"], "bfloat16")])
def test_params_dtype_provenance(argv, dtype):
    assert provenance(resolve(argv), "params_dtype") == (
        TorchDType(dtype), "derived", "", ("fp16", "bf16"))


def test_dynamic_loss_scaling_turns_off_the_nan_check_whole():
    resolved = resolve(["--fp16"])
    assert provenance(resolved, "check_for_nan_in_loss_and_grad") == (
        False, "derived", "dynamic loss scaling", ("fp16", "loss_scale"))
    assert warned(resolved) == [
        ("turning off --check-for-nan-in-loss-and-grad: dynamic loss scaling uses NaNs in "
         "gradients to lower the scale", ("--fp16", "--loss-scale"))]


def test_a_nan_check_already_off_is_left_quietly():
    resolved = resolve(["--fp16", "--no-check-for-nan-in-loss-and-grad"])
    assert resolved.source("check_for_nan_in_loss_and_grad").source == "command-line"
    assert warned(resolved) == []


@pytest.mark.parametrize("argv, expected", [
    (["--bf16"], (True, "derived", "bf16 training accumulates gradients in fp32",
                  ("bf16", "main_grads_dtype"))),
    (["--bf16", "--grad-reduce-in-bf16", "--accumulate-allreduce-grads-in-fp32"],
     (False, "derived", "gradients are reduced in bf16", ("grad_reduce_in_bf16",))),
])
def test_gradient_accumulation_precision_provenance(argv, expected):
    assert provenance(resolve(argv), "accumulate_allreduce_grads_in_fp32") == expected


@pytest.mark.parametrize("argv", [["--bf16", "--grad-reduce-in-bf16"], ["--fp16"], []])
def test_gradient_accumulation_is_left_alone(argv):
    resolved = resolve(argv)
    assert resolved.accumulate_allreduce_grads_in_fp32 is False
    assert resolved.source("accumulate_allreduce_grads_in_fp32").source == "default"


def test_fp32_accumulation_turns_off_the_accumulating_reduce_scatter_whole():
    resolved = resolve(["--bf16", "--ddp-reduce-scatter-with-fp32-accumulation"])
    assert provenance(resolved, "ddp_reduce_scatter_with_fp32_accumulation") == (
        False, "derived", "", ("accumulate_allreduce_grads_in_fp32",))
    assert warned(resolved) == [
        ("turning off --ddp-reduce-scatter-with-fp32-accumulation: "
         "--accumulate-allreduce-grads-in-fp32 already reduces in fp32",
         ("--ddp-reduce-scatter-with-fp32-accumulation", "--accumulate-allreduce-grads-in-fp32"))]


def test_query_key_layer_scaling_softmax_provenance():
    assert provenance(resolve(["--apply-query-key-layer-scaling"]),
                      "attention_softmax_in_fp32") == (
        True, "derived", "query-key layer scaling needs an fp32 softmax",
        ("apply_query_key_layer_scaling",))
    given = resolve(["--apply-query-key-layer-scaling", "--attention-softmax-in-fp32"])
    assert given.source("attention_softmax_in_fp32").source == "command-line"


def test_output_dtypes_provenance():
    resolved = resolve(["--output-logit-dtype", "fp32",
                        "--mamba-training-ssm-states-dtype", "bf16"])
    assert provenance(resolved, "logit_dtype") == (
        TorchDType("float32"), "derived", "", ("logit_dtype",))
    assert provenance(resolved, "mamba_training_ssm_states_dtype") == (
        TorchDType("bfloat16"), "derived", "", ("mamba_training_ssm_states_dtype",))


# -- settings of other plugins, as they come: absent, or changed after precision saw them --


def _kernel(*extra):
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
    from megaplug.builtin import parallel, precision
    from ppe_support import Neighbours

    return Kernel(PluginSet(PluginSelection(autoload=False),
                            builtins=[parallel, precision, Neighbours(), *extra]))


def _resolve(kernel, argv):
    from ppe_support import ENV, target

    return kernel.resolve(list(argv), environ=dict(ENV), target=target(ENV))


def test_without_the_experimental_plugin_main_gradients_are_fp32():
    # --main-grads-dtype belongs to the experimental plugin; fp32 is Megatron's default
    resolved = _resolve(_kernel(), ["--bf16"])
    assert "main_grads_dtype" not in resolved
    assert provenance(resolved, "accumulate_allreduce_grads_in_fp32") == (
        True, "derived", "bf16 training accumulates gradients in fp32",
        ("bf16", "main_grads_dtype"))


class _TurnsDistributedOptimizerOff:
    """Stands in for a plugin turning the distributed optimizer off after precision's
    checks would have seen it on (for a reason named by ``cause``)."""

    def __init__(self, cause: str) -> None:
        self.cause = cause
        self.megaplug_plugin = PluginInfo(name=f"off_by_{cause}", after=("parallel",))

    @hookimpl
    def derive(self, config) -> None:
        if config.use_distributed_optimizer:
            config.set("use_distributed_optimizer", False, inputs=(self.cause,),
                       reason="turned off after the precision checks")


GATHER = ["--fp8-format", "e4m3", "--fp8-param-gather", "--use-distributed-optimizer"]


@pytest.mark.parametrize("cause", ["freeze_all_layers", "optimizer"])
def test_a_distributed_optimizer_turned_off_later_still_shards_the_gather(cause):
    resolved = _resolve(_kernel(_TurnsDistributedOptimizerOff(cause)), GATHER)
    assert resolved.use_distributed_optimizer is False
    assert resolved.fp8_param_gather is True


def test_a_distributed_optimizer_turned_off_for_another_reason_does_not():
    import megaplug

    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(_kernel(_TurnsDistributedOptimizerOff("seq_length")), GATHER)
    assert [(p.message, tuple(p.flags)) for p in info.value.problems] == [
        (f"--fp8-param-gather {SHARDED}", ("--fp8-param-gather", "--use-distributed-optimizer"))]
