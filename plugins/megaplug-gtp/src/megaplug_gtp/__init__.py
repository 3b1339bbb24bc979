"""megaplug-gtp: tensor-parallel weight sharding with rematerialization (GTP).

Adds ``--tensor-parallel-num-weight-shards``, its expert twin and the ``--gtp-*`` flags.
Resolves ``gtp_weight_remat_size`` / ``expert_gtp_weight_remat_size`` (weight shards
divided by the (expert) tensor-parallel size) in ``normalize`` and folds GTP sequence
shards into ``context_parallel_size``, before the ``parallel`` plugin derives the
data-parallel size from them (``before=("parallel",)``). Checks what GTP cannot combine
with.
"""

from __future__ import annotations

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from .layout import resolve_tensor_parallel_sequence_shards, resolve_tensor_parallel_weight_shards
from .options import GtpOptions
from .rules import (
    DERIVATIONS,
    NORMALIZATIONS,
    REMAT_CHECKS,
    remat_active,
    sequence_sharding_constraints,
)

rules = Rules(normalize=NORMALIZATIONS, derive=DERIVATIONS,
              validate=(sequence_sharding_constraints,))
rules.validate(*REMAT_CHECKS, when=remat_active)

megaplug_plugin = PluginInfo(
    name="gtp",
    description="GTP: tensor-parallel weight sharding with weight rematerialization.",
    version="0.1.0",
    before=("parallel",),
    rules=rules,
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare the GTP flags and the derived remat sizes."""
    flags.add_options(GtpOptions)


__all__ = [
    "GtpOptions",
    "megaplug_plugin",
    "resolve_tensor_parallel_sequence_shards",
    "resolve_tensor_parallel_weight_shards",
]
