"""megaplug plugin ``distillation``: logits distillation for Megatron.

A teacher run saves its top-k (optionally top-p masked) logits with ``--logits-save-dir``;
a student run loads them with ``--logits-load-dir`` and mixes the distillation loss into
its LM loss. This plugin declares those flags and checks what saving logits needs.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules


megaplug_plugin = PluginInfo(
    name="distillation",
    description="Logits distillation: save a teacher's top logits, train a student on them.",
    options="megaplug_distillation.options:DistillationOptions",
    version="0.1.0",
    # named, not imported: the checks module is imported when a resolve first validates
    rules=Rules(validate=("megaplug_distillation.checks:CHECKS",)),
)
