"""The experimental plugin's settings: model specs, hybrid layer patterns, YAML configs, the
precision-aware optimizer and Triton autotuning."""


from typing import Optional, Sequence, Union


from megaplug import Flag, TorchDType, options

# the parser lives apart, so that a flag table read from the snapshot imports it alone
from .converters import parse_block_size

#: A dtype setting: its CLI name until the plugin maps it to a torch dtype.
DTypeSetting = Union[str, TorchDType]




@options
class ExperimentalOptions:
    """Every setting the experimental plugin declares."""

    enable_experimental: bool = Flag(
        default=False,
        help="Turn on features that are still experimental.")
    spec: Optional[list[str]] = Flag(
        default=None,
        nargs="*", help="Module and function returning the layer spec to build the model from "
                        "('local' selects the local implementation).")
    hybrid_layer_pattern: Optional[str] = Flag(
        default=None,
        help="One symbol per layer of a hybrid model (M Mamba, G gated delta net, * attention, "
             "D sparse attention, + multi-latent attention, - MLP, E experts); '|' splits "
             "pipeline segments and '/' appends MTP depths, e.g. 'M-M*-|M-M*-/MM/MM'.")
    hybrid_override_pattern: Optional[str] = Flag(
        default=None,
        help="Deprecated spelling of --hybrid-layer-pattern.")
    yaml_cfg: Optional[str] = Flag(
        default=None,
        help="Megatron YAML model configuration (not supported; use --config).")

    use_precision_aware_optimizer: bool = Flag(
        default=False,
        help="Use Transformer Engine's precision-aware optimizer, which may keep main "
             "parameters and optimizer states in lower precision.")
    main_grads_dtype: DTypeSetting = Flag(
        default="fp32",
        choices=("fp32", "bf16"), help="dtype of the main gradients.")
    main_params_dtype: DTypeSetting = Flag(
        default="fp32",
        choices=("fp32", "fp16"),
        help="dtype of the main parameters (precision-aware optimizer).")
    exp_avg_dtype: DTypeSetting = Flag(
        default="fp32",
        choices=("fp32", "fp16", "bf16", "fp8"),
        help="Storage dtype of Adam's first moment (precision-aware optimizer).")
    exp_avg_sq_dtype: DTypeSetting = Flag(
        default="fp32",
        choices=("fp32", "fp16", "bf16", "fp8"),
        help="Storage dtype of Adam's second moment (precision-aware optimizer).")

    triton_autotune_block_sizes: Sequence[tuple[str, int]] = Flag(
        default=(),
        type=parse_block_size, nargs="+", metavar="BLOCK_NAME=VALUE",
        help="Triton block sizes to use when no tuned entry applies, e.g. BLOCK_SIZE=128 "
             "BLOCK_M=64.")
