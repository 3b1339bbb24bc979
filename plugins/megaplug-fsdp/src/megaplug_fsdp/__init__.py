"""megaplug fsdp plugin: fully sharded data parallelism with Torch FSDP2 or Megatron-FSDP.

Declares the FSDP flags, derives what each implementation implies (distributed optimizer,
double buffers, dtypes, stream priorities) and checks what it rules out, including the
combinations with built-in settings; while FSDP is in use it takes over the built-in
rules that would judge sharded parameters or CUDA connections without knowing of it.
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, Rules


def uses_fsdp(config: Draft) -> bool:
    """Whether either FSDP implementation is on (Megatron-FSDP is --use-custom-fsdp in 0.13,
    the only line where that is a flag: elsewhere the setting is derived, later)."""
    return bool(config.use_torch_fsdp2 or config.use_megatron_fsdp
                or config.get("use_custom_fsdp"))


def uses_megatron_fsdp(config: Draft) -> bool:
    """Whether Megatron-FSDP, which gathers parameters after the step itself, is on."""
    return bool(config.use_megatron_fsdp)


# named, not imported: each module is imported when a resolve first runs the phase
rules = Rules(
    # each implementation's requirements are checked on the values as given
    derive=("megaplug_fsdp.torch_fsdp2:DERIVATIONS", "megaplug_fsdp.shared:DTYPE_DERIVATIONS",
            "megaplug_fsdp.megatron_fsdp:DERIVATIONS",
            "megaplug_fsdp.shared:STREAM_DERIVATIONS"),
    validate=("megaplug_fsdp.shared:CHECKS", "megaplug_fsdp.across:CHECKS"),
)
# FSDP shards parameters itself, and wants several CUDA connections
rules.supersede("precision.check_param_gather_sharding",
                "parallel.check_cuda_device_max_connections", when=uses_fsdp)
rules.supersede("parallel.check_overlap_param_gather_sharding", when=uses_megatron_fsdp)

megaplug_plugin = PluginInfo(
    name="fsdp",
    description="Fully sharded data parallelism: Torch FSDP2 and Megatron-FSDP.",
    options="megaplug_fsdp.options:FsdpOptions",
    # FSDP's checks read values as given and its derivations (distributed optimizer,
    # param-gather precision, stream groups) come before these plugins' own in Megatron.
    before=("gtp", "precision", "training"),
    rules=rules,
)
