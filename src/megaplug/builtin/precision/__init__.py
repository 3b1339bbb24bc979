"""Numerical precision: fp16/bf16 parameters, fp8 and fp4 GEMMs, loss scaling and the
precision of gradient reduction.

Derives ``params_dtype`` (a :class:`megaplug.TorchDType`), turns on fp32 gradient
accumulation for bf16, and maps the output-logit and Mamba state dtypes to torch dtypes.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="precision",
    description="fp16/bf16/fp8/fp4 training, loss scaling and gradient-reduction precision.",
    options=f"{__name__}.options:PrecisionOptions",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(derive=(f"{__name__}.rules:DERIVE",), validate=(f"{__name__}.rules:VALIDATE",)),
)
