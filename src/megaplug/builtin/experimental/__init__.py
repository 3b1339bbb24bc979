"""Experimental features: layer specs, hybrid (Mamba/attention/MoE) layer patterns, the
precision-aware optimizer and Triton autotune block sizes.

The hybrid layer pattern decides ``num_layers`` and ``mtp_num_layers`` (model settings) and,
from its ``|`` segments, ``virtual_pipeline_model_parallel_size``; this plugin therefore runs
before ``model`` and ``parallel``. Switching on multi-latent attention for MLA symbols in the
pattern is the ``mla`` plugin's job.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="experimental",
    description="Layer specs, hybrid layer patterns, precision-aware optimizer, Triton autotune.",
    options=f"{__name__}.options:ExperimentalOptions",
    before=("model", "parallel"),
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(normalize=(f"{__name__}.rules:NORMALIZE",), derive=(f"{__name__}.rules:DERIVE",),
                validate=(f"{__name__}.rules:VALIDATE",)),
)
