"""The precision plugin's settings: fp16/bf16/fp8/fp4 training, loss scaling, precision of
gradient reduction and of a few special tensors."""


from typing import Optional, Union

from typing_extensions import Annotated

from megaplug import Computed, Flag, TorchDType, options


@options
class PrecisionOptions:
    """Every setting the precision plugin declares or derives."""

    # -- parameter precision --------------------------------------------------------------
    fp16: Annotated[bool, Flag(help="Train with fp16 parameters and dynamic loss scaling.")] = False
    bf16: Annotated[bool, Flag(help="Train with bf16 parameters.")] = False
    disable_bf16_reduced_precision_matmul: Annotated[bool, Flag(
        help="Keep fp32 accumulation in bf16 matmuls (no reduced-precision reductions).")] = False

    # -- fp8 --------------------------------------------------------------------------------
    fp8: Annotated[Optional[str], Flag(
        "--fp8-format", choices=("e4m3", "hybrid"),
        help="Run GEMMs in fp8: e4m3 everywhere, or hybrid (e4m3 forward, e5m2 backward).")] = None
    fp8_recipe: Annotated[str, Flag(
        choices=("tensorwise", "delayed", "mxfp8", "blockwise", "custom"),
        help="How fp8 scaling factors are chosen.")] = "delayed"
    fp8_quantizer_factory: Annotated[Optional[str], Flag(
        help="Import path of a quantizer factory for the custom fp8 recipe.")] = None
    fp8_margin: Annotated[int, Flag(help="Scaling-factor margin for fp8 (power-of-two shift).")] = 0
    fp8_interval: Annotated[int, Flag(
        help="Iterations between fp8 scaling-factor updates (deprecated by TE).")] = 1
    fp8_amax_history_len: Annotated[int, Flag(
        help="Number of past amax values kept for delayed fp8 scaling.")] = 1
    fp8_amax_compute_algo: Annotated[str, Flag(
        choices=("most_recent", "max"),
        help="How the amax history becomes the scaling amax.")] = "most_recent"
    fp8_wgrad: Annotated[bool, Flag(
        "--no-fp8-wgrad", "--disable-fp8-wgrad",
        help="Compute weight gradients in higher precision instead of fp8.")] = True
    fp8_output_proj: Annotated[bool, Flag(
        help="Run the attention output projection in fp8 too.")] = False
    first_last_layers_bf16: Annotated[bool, Flag(
        help="Keep the first and last transformer layers in bf16 under fp8/fp4.")] = False
    num_layers_at_start_in_bf16: Annotated[int, Flag(
        help="Leading layers kept in bf16 with --first-last-layers-bf16.")] = 1
    num_layers_at_end_in_bf16: Annotated[int, Flag(
        help="Trailing layers kept in bf16 with --first-last-layers-bf16.")] = 1
    use_kitchen_attention: Annotated[bool, Flag(
        help="Use the kitchen quantized attention implementation.")] = False
    kitchen_attention_backend: Annotated[str, Flag(
        choices=("sdpa", "fa"), help="Kernel behind kitchen attention.")] = "sdpa"

    # -- fp4 --------------------------------------------------------------------------------
    fp4: Annotated[Optional[str], Flag(
        "--fp4-format", choices=("e2m1",), help="Run GEMMs in fp4 (NVFP4, e2m1).")] = None
    fp4_recipe: Annotated[str, Flag(
        choices=("nvfp4", "custom"), help="How fp4 scaling factors are chosen.")] = "nvfp4"
    fp4_quantizer_factory: Annotated[Optional[str], Flag(
        help="Import path of a quantizer factory for the custom fp4 recipe.")] = None

    # -- parameter all-gather in low precision (Transformer Engine) -------------------------
    fp8_param_gather: Annotated[bool, Flag(
        help="Keep compute parameters in fp8 and all-gather them in fp8.")] = False
    fp4_param_gather: Annotated[bool, Flag(
        help="Keep compute parameters in fp4 and all-gather them in fp4.")] = False
    te_precision_config_file: Annotated[Optional[str], Flag(
        help="File of per-module precision overrides for Transformer Engine.")] = None

    # -- loss scaling -----------------------------------------------------------------------
    loss_scale: Annotated[Optional[float], Flag(
        help="Static loss scale (a power of two helps fp16); none means dynamic scaling.")] = None
    initial_loss_scale: Annotated[float, Flag(
        help="Starting loss scale for dynamic scaling.")] = 2**32
    min_loss_scale: Annotated[float, Flag(
        help="Smallest loss scale dynamic scaling may use.")] = 1.0
    loss_scale_window: Annotated[float, Flag(
        help="Iterations without overflow before dynamic scaling raises the scale.")] = 1000
    hysteresis: Annotated[int, Flag(
        help="Overflows tolerated before dynamic scaling lowers the scale.")] = 2

    # -- precision of reductions and special tensors ----------------------------------------
    grad_reduce_in_bf16: Annotated[bool, Flag(help="Reduce gradients in bf16.")] = False
    attention_softmax_in_fp32: Annotated[bool, Flag(
        help="Compute attention masking and softmax in fp32.")] = False
    accumulate_allreduce_grads_in_fp32: Annotated[bool, Flag(
        help="Accumulate and all-reduce gradients in fp32.")] = False
    fp16_lm_cross_entropy: Annotated[bool, Flag(
        help="Compute the language-model cross entropy in fp16.")] = False
    logit_dtype: Annotated[Optional[Union[str, TorchDType]], Flag(
        "--output-logit-dtype", type=str, choices=("bf16", "fp32"),
        help="Output dtype of the output-layer GEMM; none keeps its input dtype.")] = None
    reuse_grad_buf_for_mxfp8_param_ag: Annotated[bool, Flag(
        help="Reuse the gradient buffer for the MXFP8 parameter all-gather.")] = False
    mamba_training_ssm_states_dtype: Annotated[Optional[Union[str, TorchDType]], Flag(
        type=str, choices=("fp32", "bf16"),
        help="Dtype of the inter-chunk SSM states Mamba materializes in training.")] = None

    # -- values derived by this plugin ------------------------------------------------------
    params_dtype: Annotated[Optional[TorchDType], Computed(
        "dtype of the model parameters: fp16, bf16 or fp32.")] = None
