"""The ``checkpointing`` plugin: saving, loading, formats and conversion of checkpoints.

Derives ``use_dist_ckpt`` (every format but the legacy ``torch`` one is distributed),
turns off ``--async-save`` without a persistent worker, turns on ``--no-load-optim``
for ``--skip-train`` and checks save intervals, conversion inputs, non-persistent
checkpoint settings and format restrictions. Plugins that read ``use_dist_ckpt`` or
the final ``async_save`` / ``no_load_optim`` declare ``after=("checkpointing",)``.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

megaplug_plugin = PluginInfo(
    name="checkpointing",
    description="Saving and loading checkpoints: where, how often, which format.",
    # named by module: importing the plugin to list or document it imports no rules; the
    # early checks (normalize) read the values as given, before other plugins adjust them
    rules=Rules(normalize=(f"{__name__}.derivations:NORMALIZE",),
                derive=(f"{__name__}.derivations:DERIVE",),
                validate=(f"{__name__}.checks:VALIDATE",)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare every checkpointing flag."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import CheckpointingOptions

    flags.add_options(CheckpointingOptions)
    # Megatron gives this retired flag no type; an options field would infer ``str``.
    flags.add_argument("--dist-ckpt-format", dest="dist_ckpt_format_deprecated",
                       help="Deprecated and ignored: choose the format with --ckpt-format.")


__all__ = ["CheckpointingOptions", "megaplug_plugin"]


def __getattr__(name: str) -> object:
    if name == "CheckpointingOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
