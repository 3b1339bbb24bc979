"""The precision plugin's settings: fp16/bf16/fp8/fp4 training, loss scaling, precision of
gradient reduction and of a few special tensors."""


from typing import Optional, Union


from megaplug import Computed, Flag, TorchDType, options


@options
class PrecisionOptions:
    """Every setting the precision plugin declares or derives."""

    # -- parameter precision --------------------------------------------------------------
    fp16: bool = Flag(default=False, help="Train with fp16 parameters and dynamic loss scaling.")
    bf16: bool = Flag(default=False, help="Train with bf16 parameters.")
    disable_bf16_reduced_precision_matmul: bool = Flag(
        default=False,
        help="Keep fp32 accumulation in bf16 matmuls (no reduced-precision reductions).")

    # -- fp8 --------------------------------------------------------------------------------
    fp8: Optional[str] = Flag(
        "--fp8-format", default=None, choices=("e4m3", "hybrid"),
        help="Run GEMMs in fp8: e4m3 everywhere, or hybrid (e4m3 forward, e5m2 backward).")
    fp8_recipe: str = Flag(
        default="delayed",
        choices=("tensorwise", "delayed", "mxfp8", "blockwise", "custom"),
        help="How fp8 scaling factors are chosen.")
    fp8_quantizer_factory: Optional[str] = Flag(
        default=None,
        help="Import path of a quantizer factory for the custom fp8 recipe.")
    fp8_margin: int = Flag(default=0, help="Scaling-factor margin for fp8 (power-of-two shift).")
    fp8_interval: int = Flag(
        default=1,
        help="Iterations between fp8 scaling-factor updates (deprecated by TE).")
    fp8_amax_history_len: int = Flag(
        default=1,
        help="Number of past amax values kept for delayed fp8 scaling.")
    fp8_amax_compute_algo: str = Flag(
        default="most_recent",
        choices=("most_recent", "max"),
        help="How the amax history becomes the scaling amax.")
    fp8_wgrad: bool = Flag(
        "--no-fp8-wgrad", "--disable-fp8-wgrad", default=True,
        help="Compute weight gradients in higher precision instead of fp8.")
    fp8_output_proj: bool = Flag(
        default=False,
        help="Run the attention output projection in fp8 too.")
    first_last_layers_bf16: bool = Flag(
        default=False,
        help="Keep the first and last transformer layers in bf16 under fp8/fp4.")
    num_layers_at_start_in_bf16: int = Flag(
        default=1,
        help="Leading layers kept in bf16 with --first-last-layers-bf16.")
    num_layers_at_end_in_bf16: int = Flag(
        default=1,
        help="Trailing layers kept in bf16 with --first-last-layers-bf16.")
    use_kitchen_attention: bool = Flag(
        default=False,
        help="Use the kitchen quantized attention implementation.")
    kitchen_attention_backend: str = Flag(
        default="sdpa",
        choices=("sdpa", "fa"), help="Kernel behind kitchen attention.")

    # -- fp4 --------------------------------------------------------------------------------
    fp4: Optional[str] = Flag(
        "--fp4-format", default=None, choices=("e2m1",), help="Run GEMMs in fp4 (NVFP4, e2m1).")
    fp4_recipe: str = Flag(
        default="nvfp4",
        choices=("nvfp4", "custom"), help="How fp4 scaling factors are chosen.")
    fp4_quantizer_factory: Optional[str] = Flag(
        default=None,
        help="Import path of a quantizer factory for the custom fp4 recipe.")

    # -- parameter all-gather in low precision (Transformer Engine) -------------------------
    fp8_param_gather: bool = Flag(
        default=False,
        help="Keep compute parameters in fp8 and all-gather them in fp8.")
    fp4_param_gather: bool = Flag(
        default=False,
        help="Keep compute parameters in fp4 and all-gather them in fp4.")
    te_precision_config_file: Optional[str] = Flag(
        default=None,
        help="File of per-module precision overrides for Transformer Engine.")

    # -- loss scaling -----------------------------------------------------------------------
    loss_scale: Optional[float] = Flag(
        default=None,
        help="Static loss scale (a power of two helps fp16); none means dynamic scaling.")
    initial_loss_scale: float = Flag(default=2**32, help="Starting loss scale for dynamic scaling.")
    min_loss_scale: float = Flag(default=1.0, help="Smallest loss scale dynamic scaling may use.")
    loss_scale_window: float = Flag(
        default=1000,
        help="Iterations without overflow before dynamic scaling raises the scale.")
    hysteresis: int = Flag(
        default=2,
        help="Overflows tolerated before dynamic scaling lowers the scale.")

    # -- precision of reductions and special tensors ----------------------------------------
    grad_reduce_in_bf16: bool = Flag(default=False, help="Reduce gradients in bf16.")
    attention_softmax_in_fp32: bool = Flag(
        default=False,
        help="Compute attention masking and softmax in fp32.")
    accumulate_allreduce_grads_in_fp32: bool = Flag(
        default=False,
        help="Accumulate and all-reduce gradients in fp32.")
    fp16_lm_cross_entropy: bool = Flag(
        default=False,
        help="Compute the language-model cross entropy in fp16.")
    logit_dtype: Optional[Union[str, TorchDType]] = Flag(
        "--output-logit-dtype", default=None, type=str, choices=("bf16", "fp32"),
        help="Output dtype of the output-layer GEMM; none keeps its input dtype.")
    reuse_grad_buf_for_mxfp8_param_ag: bool = Flag(
        default=False,
        help="Reuse the gradient buffer for the MXFP8 parameter all-gather.")
    mamba_training_ssm_states_dtype: Optional[Union[str, TorchDType]] = Flag(
        default=None,
        type=str, choices=("fp32", "bf16"),
        help="Dtype of the inter-chunk SSM states Mamba materializes in training.")

    # -- values derived by this plugin ------------------------------------------------------
    params_dtype: Optional[TorchDType] = Computed(
        "dtype of the model parameters: fp16, bf16 or fp32.", default=None)
