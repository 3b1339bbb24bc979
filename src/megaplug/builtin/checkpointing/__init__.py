"""The ``checkpointing`` plugin: saving, loading, formats and conversion of checkpoints.

Derives ``use_dist_ckpt`` (every format but the legacy ``torch`` one is distributed),
turns off ``--async-save`` without a persistent worker, turns on ``--no-load-optim``
for ``--skip-train`` and checks save intervals, conversion inputs, non-persistent
checkpoint settings and format restrictions. Plugins that read ``use_dist_ckpt`` or
the final ``async_save`` / ``no_load_optim`` declare ``after=("checkpointing",)``.
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, hookimpl

from .checks import CHECKS
from .derivations import DERIVATIONS, EARLY_CHECKS
from .options import CheckpointingOptions

megaplug_plugin = PluginInfo(
    name="checkpointing",
    description="Saving and loading checkpoints: where, how often, which format.",
)


@hookimpl
def add_args(flags) -> None:  # type: ignore[no-untyped-def]
    """Declare every checkpointing flag."""
    flags.add_options(CheckpointingOptions)
    # Megatron gives this retired flag no type; an options field would infer ``str``.
    flags.add_argument("--dist-ckpt-format", dest="dist_ckpt_format_deprecated",
                       help="Deprecated and ignored: choose the format with --ckpt-format.")


@hookimpl
def normalize(config: Draft) -> None:
    """Check combinations on the values as given, before other plugins adjust them."""
    for check in EARLY_CHECKS:
        check(config)


@hookimpl
def derive(config: Draft) -> None:
    """Compute ``use_dist_ckpt`` and adjust async save, optimizer loading and replication."""
    for step in DERIVATIONS:
        step(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report every checkpointing problem."""
    for check in CHECKS:
        check(config)


__all__ = ["CheckpointingOptions", "megaplug_plugin"]
