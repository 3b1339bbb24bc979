"""megaplug fsdp plugin: fully sharded data parallelism with Torch FSDP2 or Megatron-FSDP.

Declares the FSDP flags, derives what each implementation implies (distributed optimizer,
double buffers, dtypes, stream priorities) and checks what it rules out, including the
combinations with built-in settings; while FSDP is in use it takes over the built-in
rules that would judge sharded parameters or CUDA connections without knowing of it.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from . import across, megatron_fsdp, shared, torch_fsdp2

__all__ = ["FsdpOptions", "megaplug_plugin"]

rules = Rules(
    # each implementation's requirements are checked on the values as given
    derive=(torch_fsdp2.derive_torch_fsdp2, shared.derive_dtypes,
            megatron_fsdp.derive_megatron_fsdp, shared.derive_stream_priorities),
    validate=(shared.check_manual_registration, shared.check_checkpoint_format,
              across.check_torch_dcp_format, across.check_dynamic_context_parallel,
              across.check_classic_optimizer,
              across.warn_device_connections_with_model_parallelism),
)
# FSDP shards parameters itself, and wants several CUDA connections
rules.supersede("precision.check_param_gather_sharding",
                "parallel.check_cuda_device_max_connections", when=across.uses_fsdp)
rules.supersede("parallel.check_overlap_param_gather_sharding", when=across.uses_megatron_fsdp)

megaplug_plugin = PluginInfo(
    name="fsdp",
    description="Fully sharded data parallelism: Torch FSDP2 and Megatron-FSDP.",
    # FSDP's checks read values as given and its derivations (distributed optimizer,
    # param-gather precision, stream groups) come before these plugins' own in Megatron.
    before=("gtp", "precision", "training"),
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the FSDP flags."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import FsdpOptions

    flags.add_options(FsdpOptions)


def __getattr__(name: str) -> object:
    if name == "FsdpOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
