"""Activation and fusion rules at their boundaries: each problem whole (plugin, message, flags,
hint) and the near miss that must pass.

Megatron: a clamped SwiGLU (``--activation-func-clamp-value``, positive and finite) is an MoE
expert activation without ``--glu-linear-offset`` or TE's activation; other activations ignore
the clamp. ``--fused-residual-rmsnorm`` needs RMSNorm. Without the model plugin its settings
read as Megatron's defaults: linear biases on, no GLU offset.
"""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, every_problem, pre


MOE = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
       "alltoall", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
CLAMPED = [*MOE, "--swiglu", "--activation-func-clamp-value"]
#: A launch with the model plugin blocked (no model flags).
NO_MODEL = ["-p", "no:model", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
            "--seq-length", "128"]


def whole(argv: list[str]) -> list[tuple]:
    """Every problem of the launch as (plugin, message, flags, hint), on ``DENSE`` unless the
    model plugin is blocked."""
    return every_problem(argv, base=[] if argv[:2] == NO_MODEL[:2] else DENSE)



CASES: list[tuple[str, list[str], list[tuple]]] = [
    ("clamp 1", [*CLAMPED, "1.0"], []),
    ("clamp 0", [*CLAMPED, "0"],
     [pre("--activation-func-clamp-value 0.0 must be a positive finite number for SwiGLU",
          ("--activation-func-clamp-value",), "use a positive clamp value")]),
    ("clamp of quick GeGLU", ["--quick-geglu", "--activation-func-clamp-value", "7.0"], []),
    ("clamp with GLU offset", [*CLAMPED, "7.0", "--glu-linear-offset", "1.0"],
     [pre("--glu-linear-offset 1.0 with bias-activation fusion needs the quick GeGLU "
          "activation, not SwiGLU", ("--glu-linear-offset", "--no-bias-swiglu-fusion"),
          "add --no-bias-swiglu-fusion, or use --quick-geglu"),
      pre("--glu-linear-offset must be 0 with a clamped SwiGLU",
          ("--glu-linear-offset", "--activation-func-clamp-value"), "drop --glu-linear-offset")]),
    ("clamp with TE activation", [*CLAMPED, "7.0", "--use-te-activation-func"],
     [pre("bias-activation fusion (on by default) and --use-te-activation-func cannot both be "
          "on", ("--no-bias-swiglu-fusion", "--use-te-activation-func"),
          "add --no-bias-swiglu-fusion, or drop --use-te-activation-func"),
      pre("--use-te-activation-func does not clamp SwiGLU",
          ("--use-te-activation-func", "--activation-func-clamp-value"),
          "drop --use-te-activation-func")]),
    ("fused residual RMSNorm", ["--fused-residual-rmsnorm", "--normalization", "RMSNorm"], []),
    ("fused residual LayerNorm", ["--fused-residual-rmsnorm"],
     [pre("--fused-residual-rmsnorm needs --normalization RMSNorm, got LayerNorm",
          ("--fused-residual-rmsnorm", "--normalization"),
          "use --normalization RMSNorm, or drop --fused-residual-rmsnorm")]),
    # bias-GeLU fusion (training's, on) with Megatron's model defaults: biases, no offset
    ("fused bias-GeLU, model defaults", NO_MODEL, []),
    # training turns the fusion off itself when --disable-bias-linear removes the biases
    ("fused bias-GeLU without biases", ["--disable-bias-linear"], []),
]


@pytest.mark.parametrize("argv, expected",
                         [pytest.param(a, e, id=name) for name, a, e in CASES])
def test_fusion_rule_whole(argv: list[str], expected: list[tuple]) -> None:
    assert whole(argv) == expected
