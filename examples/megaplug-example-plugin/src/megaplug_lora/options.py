"""The LoRA settings: one options class, one field per setting.

Kept apart from the plugin module, named by ``PluginInfo(options=...)``: megaplug keeps the
flag table it declared and builds later processes' tables from it, so a training rank
never imports this module (nor ``dataclasses``).
"""

from typing import Optional

from megaplug import Computed, Flag, options

#: Linear layers an adapter can wrap, by their Megatron core module names.
TARGET_MODULES = ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")


@options
class LoraOptions:
    """LoRA settings: adapters are on when ``--lora-rank`` is set."""

    lora_rank: Optional[int] = Flag(
        default=None,
        help="Rank of the LoRA adapters; unset trains the full model without adapters.")
    lora_alpha: float = Flag(
        default=16.0,
        help="LoRA scale numerator: adapter outputs are multiplied by alpha / rank.")
    lora_dropout: float = Flag(
        default=0.0, help="Dropout probability applied to the adapter inputs.")
    lora_target_modules: list[str] = Flag(
        nargs="+", choices=TARGET_MODULES, metavar="MODULE",
        default=["linear_qkv", "linear_proj"],  # copied per instance, like a default_factory
        help="Linear layers that get adapters: " + ", ".join(TARGET_MODULES) + ".")
    # The old spelling: accepted, hidden from --help, migrated by normalize.
    lora_r: Optional[int] = Flag(
        default=None, hidden=True, help="Deprecated spelling of --lora-rank.")
    lora_scaling: Optional[float] = Computed(
        "Multiplier of the adapter output, lora_alpha / lora_rank; none without adapters.",
        default=None)
