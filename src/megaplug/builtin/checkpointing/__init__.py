"""The ``checkpointing`` plugin: saving, loading, formats and conversion of checkpoints.

Derives ``use_dist_ckpt`` (every format but the legacy ``torch`` one is distributed),
turns off ``--async-save`` without a persistent worker, turns on ``--no-load-optim``
for ``--skip-train`` and checks save intervals, conversion inputs, non-persistent
checkpoint settings and format restrictions. Plugins that read ``use_dist_ckpt`` or
the final ``async_save`` / ``no_load_optim`` declare ``after=("checkpointing",)``.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="checkpointing",
    description="Saving and loading checkpoints: where, how often, which format.",
    options=f"{__name__}.options:declare",
    # named by module: importing the plugin to list or document it imports no rules; the
    # early checks (normalize) read the values as given, before other plugins adjust them
    rules=Rules(normalize=(f"{__name__}.derivations:NORMALIZE",),
                derive=(f"{__name__}.derivations:DERIVE",),
                validate=(f"{__name__}.checks:VALIDATE",)),
)
