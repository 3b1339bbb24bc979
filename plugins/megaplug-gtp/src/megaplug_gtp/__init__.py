"""megaplug-gtp: tensor-parallel weight sharding with rematerialization (GTP).

Adds ``--tensor-parallel-num-weight-shards``, its expert twin and the ``--gtp-*`` flags.
Resolves ``gtp_weight_remat_size`` / ``expert_gtp_weight_remat_size`` (weight shards
divided by the (expert) tensor-parallel size) in ``normalize`` and folds GTP sequence
shards into ``context_parallel_size``, before the ``parallel`` plugin derives the
data-parallel size from them (``before=("parallel",)``). Checks what GTP cannot combine
with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from .layout import resolve_tensor_parallel_sequence_shards, resolve_tensor_parallel_weight_shards
from .options import GtpOptions
from .rules import DERIVATIONS, NORMALIZATIONS, run_checks

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="gtp",
    description="GTP: tensor-parallel weight sharding with weight rematerialization.",
    version="0.1.0",
    before=("parallel",),
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the GTP flags and the derived remat sizes."""
    flags.add_options(GtpOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Resolve weight shards and remat sizes; grow context parallelism by sequence shards."""
    for step in NORMALIZATIONS:
        step(config)


@hookimpl
def derive(config: Draft) -> None:
    """Give GTP communication high-priority streams on Blackwell and newer."""
    for step in DERIVATIONS:
        step(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report what GTP cannot be combined with."""
    run_checks(config)


__all__ = [
    "GtpOptions",
    "megaplug_plugin",
    "resolve_tensor_parallel_sequence_shards",
    "resolve_tensor_parallel_weight_shards",
]
