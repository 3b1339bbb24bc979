"""Precision derivations and checks, each a small function, in Megatron's order."""

from __future__ import annotations


from megaplug import Draft, TorchDType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: CLI dtype names and the torch dtypes they stand for.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "uint8"}



def to_torch_dtype(value: Any) -> Any:
    """``'bf16'`` -> ``TorchDType('bfloat16')``; ``None`` and dtypes pass through."""
    if isinstance(value, str) and value in DTYPES:
        return TorchDType(DTYPES[value])
    return value


def is_fp32(value: Any) -> bool:
    """Whether a dtype setting (CLI name or dtype) means fp32."""
    return value == "fp32" or str(value) == "torch.float32"


def _distributed_optimizer_before_freeze(config: Draft) -> bool:
    """--freeze-all-layers, and an emerging --optimizer (which swaps in its layer-wise
    distributed optimizer), turn the distributed optimizer off only after Megatron's
    precision checks have seen it on."""
    if config.get("use_distributed_optimizer"):
        return True
    record = config.source("use_distributed_optimizer")
    return bool(record is not None and record.source == "derived"
                and any(name in record.inputs for name in ("freeze_all_layers", "optimizer")))


# -- derive ------------------------------------------------------------------------------


def derive_params_dtype(config: Draft) -> None:
    """Parameters are fp16 or bf16 when asked, fp32 otherwise."""
    name = "float16" if config.fp16 else "bfloat16" if config.bf16 else "float32"
    config.set("params_dtype", TorchDType(name), inputs=("fp16", "bf16"))


def derive_fp16_nan_check(config: Draft) -> None:
    """Dynamic loss scaling reads NaNs as overflow signals, so the NaN check must be off."""
    if not config.fp16 or config.loss_scale or not config.get("check_for_nan_in_loss_and_grad"):
        return
    config.warn("turning off --check-for-nan-in-loss-and-grad: dynamic loss scaling uses NaNs "
                "in gradients to lower the scale", flags=("fp16", "loss_scale"))
    config.set("check_for_nan_in_loss_and_grad", False, inputs=("fp16", "loss_scale"),
               reason="dynamic loss scaling")


def derive_bf16_grad_accumulation(config: Draft) -> None:
    """bf16 training accumulates and all-reduces gradients in fp32 unless told otherwise."""
    if not config.bf16 or config.fp16:
        return
    main_grads = config.get("main_grads_dtype", "fp32")
    if config.accumulate_allreduce_grads_in_fp32 and not is_fp32(main_grads):
        config.error(f"--accumulate-allreduce-grads-in-fp32 needs fp32 main gradients, but "
                     f"--main-grads-dtype is {_dtype_name(main_grads)}",
                     flags=("accumulate_allreduce_grads_in_fp32", "main_grads_dtype"),
                     hint="use --main-grads-dtype fp32, or drop "
                          "--accumulate-allreduce-grads-in-fp32")
    if config.grad_reduce_in_bf16:
        if config.accumulate_allreduce_grads_in_fp32:
            config.set("accumulate_allreduce_grads_in_fp32", False,
                       inputs=("grad_reduce_in_bf16",), reason="gradients are reduced in bf16")
    elif not config.accumulate_allreduce_grads_in_fp32 and is_fp32(main_grads):
        config.set("accumulate_allreduce_grads_in_fp32", True, inputs=("bf16", "main_grads_dtype"),
                   reason="bf16 training accumulates gradients in fp32")


def derive_plain_fp32_reduce_scatter(config: Draft) -> None:
    """With fp32 gradient reduction the fp32-accumulating DDP reduce-scatter buys nothing."""
    name = "ddp_reduce_scatter_with_fp32_accumulation"
    if config.accumulate_allreduce_grads_in_fp32 and config.get(name):
        config.warn(f"turning off {config.spelling(name)}: "
                    "--accumulate-allreduce-grads-in-fp32 already reduces in fp32",
                    flags=(name, "accumulate_allreduce_grads_in_fp32"))
        config.set(name, False, inputs=("accumulate_allreduce_grads_in_fp32",))


def derive_attention_softmax_in_fp32(config: Draft) -> None:
    """Query-key layer scaling computes the softmax in fp32."""
    if config.get("apply_query_key_layer_scaling") and not config.attention_softmax_in_fp32:
        config.set("attention_softmax_in_fp32", True, inputs=("apply_query_key_layer_scaling",),
                   reason="query-key layer scaling needs an fp32 softmax")


def derive_dtype_settings(config: Draft) -> None:
    """The output-logit and Mamba SSM-state dtypes become torch dtypes."""
    for name in ("logit_dtype", "mamba_training_ssm_states_dtype"):
        value = config[name]
        if isinstance(value, str):
            config.set(name, to_torch_dtype(value), inputs=(name,))


DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_params_dtype,
    derive_fp16_nan_check,
    derive_bf16_grad_accumulation,
    derive_plain_fp32_reduce_scatter,
    derive_attention_softmax_in_fp32,
    derive_dtype_settings,
)


def _dtype_name(value: Any) -> str:
    return str(value).removeprefix("torch.")


# -- validate ------------------------------------------------------------------------------


def check_one_half_precision(config: Draft) -> None:
    """fp16 and bf16 exclude each other."""
    if config.fp16 and config.bf16:
        config.error("--fp16 and --bf16 cannot be used together", flags=("fp16", "bf16"),
                     hint="choose one parameter precision")


def check_low_precision_formats(config: Draft) -> None:
    """fp4 and fp8 exclude each other; fp4 needs a recent Transformer Engine."""
    if config.fp4 and config.fp8:
        config.error("--fp4-format and --fp8-format cannot be used together",
                     flags=("fp4", "fp8"), hint="choose one low-precision format")
    if config.fp4:
        problem = config.env.requirement_problem("transformer_engine", "2.7.0.dev0")
        if problem:
            config.error(f"--fp4-format (NVFP4 block scaling) {problem}", flags=("fp4",),
                         hint="upgrade Transformer Engine to 2.7 or later")


#: The first line whose validation asks FP4 parameter gathers for sharded parameters (the
#: seed's; Megatron 0.15 through main at d98e8a64dd check only FP8's).
FP4_SHARDING_RELEASE = "seed"


def check_param_gather_sharding(config: Draft) -> None:
    """Low-precision parameter gathers need sharded parameters.

    The distributed optimizer shards them (a feature that shards parameters itself takes
    this rule over); FP4's gathers ask for it only in the seed line."""
    for name in ("fp8_param_gather", "fp4_param_gather"):
        if name == "fp4_param_gather" and config.env.megatron.before(FP4_SHARDING_RELEASE):
            continue  # every release up to main takes unsharded FP4 parameter gathers
        if config[name] and not _distributed_optimizer_before_freeze(config):
            config.error(f"{config.spelling(name)} needs sharded parameters: "
                         "--use-distributed-optimizer, or a fully sharded data-parallel "
                         "implementation", flags=(name, "use_distributed_optimizer"),
                         hint="add --use-distributed-optimizer")


def check_fp4_param_gather_format(config: Draft) -> None:
    """fp4 parameter gathers need the fp4 format."""
    if config.fp4_param_gather and not config.fp4:
        config.error("--fp4-param-gather needs --fp4-format", flags=("fp4_param_gather", "fp4"),
                     hint="add --fp4-format e2m1, or drop --fp4-param-gather")


def check_mxfp8_inference(config: Draft) -> None:
    """MXFP8 in the inference-optimized layers relies on recent FlashInfer kernels.

    Checked from Megatron 0.17 on."""
    if config.fp8_recipe != "mxfp8" or config.get("transformer_impl") != "inference_optimized" \
            or config.env.megatron.before("0.17.0"):
        return
    problem = config.env.requirement_problem("flashinfer", "0.6.4")
    if problem:
        config.error(f"--fp8-recipe mxfp8 with --transformer-impl inference_optimized {problem}",
                     flags=("fp8_recipe", "transformer_impl"),
                     hint="install FlashInfer 0.6.4 or later, or use another fp8 recipe")


def check_mixed_precision_options(config: Draft) -> None:
    """fp16 cross entropy needs fp16; an fp32 residual stream needs fp16 or bf16."""
    if config.fp16_lm_cross_entropy and not config.fp16:
        config.error("--fp16-lm-cross-entropy needs --fp16",
                     flags=("fp16_lm_cross_entropy", "fp16"),
                     hint="add --fp16 or drop --fp16-lm-cross-entropy")
    if config.get("fp32_residual_connection") and not (config.fp16 or config.bf16):
        config.error("--fp32-residual-connection needs --fp16 or --bf16",
                     flags=("fp32_residual_connection", "fp16", "bf16"),
                     hint="add --bf16 (or --fp16); in fp32 training the residual is fp32 already")


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_one_half_precision,
    check_low_precision_formats,
    check_param_gather_sharding,
    check_fp4_param_gather_format,
    check_mxfp8_inference,
    check_mixed_precision_options,
)
