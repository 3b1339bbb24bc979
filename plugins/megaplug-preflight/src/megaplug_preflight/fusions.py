"""Activation functions and the fused kernels around them: bias-activation fusion, TE
activations, clamped SwiGLU, fused residual RMSNorm."""

from __future__ import annotations

import math

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Activations the fused bias-activation kernels implement (GeLU, SiLU for SwiGLU, quick GeLU).
FUSED_BIAS_ACTIVATIONS = ("gelu", "silu", "quick_gelu")
#: Activations Transformer Engine's MLP implements.
TE_ACTIVATIONS = ("gelu", "silu", "relu")
ACTIVATION_NAMES = {"gelu": "GeLU", "silu": "SwiGLU", "quick_gelu": "quick GeGLU",
                    "squared_relu": "squared ReLU"}


def one_gated_activation(config: Draft) -> None:
    """``--swiglu`` chooses SiLU; squared ReLU and quick GeGLU are other activations."""
    if not config.get("swiglu"):
        return
    for other in ("squared_relu", "quick_geglu"):
        if config.get(other):
            reject(config, f"--swiglu and {config.spelling(other)} choose two activations",
                   flags=("swiglu", other), hint="keep one activation flag")
            return


def bias_activation_fusion_supported(config: Draft) -> None:
    """The fused bias-activation kernels exist for some activations and bias layouts."""
    dest = view.bias_activation_fusion_dest(config)
    if not view.bias_activation_fusion(config):
        return
    act = view.activation(config)
    name = ACTIVATION_NAMES[act]
    off = "--no-bias-swiglu-fusion" if dest == "bias_swiglu_fusion" else "--no-bias-gelu-fusion"
    chosen = view.activation_flag(config)
    act_flags = (chosen,) if chosen else ()
    if act not in FUSED_BIAS_ACTIVATIONS:
        reject(config, f"bias-activation fusion (on by default) has no kernel for the {name} "
                       "activation",
               flags=(dest, *act_flags), hint=f"add {off}")
        return
    biases = config.get("add_bias_linear", True)  # Megatron's default without the model plugin
    if act == "gelu" and not view.gated_linear_unit(config) and not biases:
        reject(config, "fused bias-GeLU needs linear biases, which --disable-bias-linear removes",
               flags=(dest, "add_bias_linear"), hint=f"add {off}")
    offset = config.get("glu_linear_offset", 0.0) or 0.0
    if offset != 0.0 and act != "quick_gelu":
        reject(config, f"{shown(config, 'glu_linear_offset')} with bias-activation fusion needs "
                       f"the quick GeGLU activation, not {name}",
               flags=("glu_linear_offset", dest), hint=f"add {off}, or use --quick-geglu")
    if config.get("use_te_activation_func"):
        reject(config, "bias-activation fusion (on by default) and --use-te-activation-func "
                       "cannot both be on",
               flags=(dest, "use_te_activation_func"),
               hint=f"add {off}, or drop --use-te-activation-func")


def te_activation_supported(config: Draft) -> None:
    """Transformer Engine's fused MLP implements GeLU, SiLU and ReLU families."""
    act = view.activation(config)
    if config.get("use_te_activation_func") and act not in TE_ACTIVATIONS:
        chosen = view.activation_flag(config)
        reject(config, f"--use-te-activation-func does not implement the "
                       f"{ACTIVATION_NAMES[act]} activation",
               flags=("use_te_activation_func", *((chosen,) if chosen else ())),
               hint="drop --use-te-activation-func")


def fused_residual_rmsnorm_needs_rmsnorm(config: Draft) -> None:
    normalization = config.get("normalization", "LayerNorm")
    if config.get("fused_residual_rmsnorm") and normalization != "RMSNorm":
        reject(config, f"--fused-residual-rmsnorm needs --normalization RMSNorm, got "
                       f"{normalization}",
               flags=("fused_residual_rmsnorm", "normalization"),
               hint="use --normalization RMSNorm, or drop --fused-residual-rmsnorm")


def clamped_swiglu(config: Draft) -> None:
    """A clamped SwiGLU is an MoE expert activation, without offset or TE activation."""
    clamp = config.get("activation_func_clamp_value")
    if clamp is None or view.activation(config) != "silu" or not view.gated_linear_unit(config):
        return
    if not math.isfinite(clamp) or clamp <= 0:
        reject(config, f"{shown(config, 'activation_func_clamp_value')} must be a positive "
                       "finite number for SwiGLU",
               flags=("activation_func_clamp_value",), hint="use a positive clamp value")
    if view.experts(config) is None:
        reject(config, "--activation-func-clamp-value with SwiGLU is only supported for MoE "
                       "models",
               flags=("activation_func_clamp_value", "num_experts"),
               hint="set --num-experts, or drop the clamp")
    if (config.get("glu_linear_offset", 0.0) or 0.0) != 0.0:
        reject(config, "--glu-linear-offset must be 0 with a clamped SwiGLU",
               flags=("glu_linear_offset", "activation_func_clamp_value"),
               hint="drop --glu-linear-offset")
    if config.get("use_te_activation_func"):
        reject(config, "--use-te-activation-func does not clamp SwiGLU",
               flags=("use_te_activation_func", "activation_func_clamp_value"),
               hint="drop --use-te-activation-func")


CHECKS: tuple[Check, ...] = (
    one_gated_activation,
    bias_activation_fusion_supported,
    te_activation_supported,
    fused_residual_rmsnorm_needs_rmsnorm,
    clamped_swiglu,
)
