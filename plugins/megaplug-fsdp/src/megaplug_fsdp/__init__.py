"""megaplug fsdp plugin: fully sharded data parallelism with Torch FSDP2 or Megatron-FSDP.

Declares the FSDP flags, derives what each implementation implies (distributed optimizer,
double buffers, dtypes, stream priorities) and checks what it rules out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from . import megatron_fsdp, shared, torch_fsdp2
from .options import FsdpOptions

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

__all__ = ["FsdpOptions", "megaplug_plugin"]

megaplug_plugin = PluginInfo(
    name="fsdp",
    description="Fully sharded data parallelism: Torch FSDP2 and Megatron-FSDP.",
    # FSDP's checks read values as given and its derivations (distributed optimizer,
    # param-gather precision, stream groups) come before these plugins' own in Megatron.
    before=("gtp", "precision", "training"),
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the FSDP flags."""
    flags.add_options(FsdpOptions)


@hookimpl
def derive(config: Draft) -> None:
    """Check each implementation's requirements and derive what it implies."""
    torch_fsdp2.derive_torch_fsdp2(config)
    shared.derive_dtypes(config)
    megatron_fsdp.derive_megatron_fsdp(config)
    shared.derive_stream_priorities(config)


@hookimpl
def validate(config: Draft) -> None:
    """Checks that hold on the final values."""
    shared.check_manual_registration(config)
    shared.check_checkpoint_format(config)
