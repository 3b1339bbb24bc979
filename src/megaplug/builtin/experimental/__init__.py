"""Experimental features: layer specs, hybrid (Mamba/attention/MoE) layer patterns, the
precision-aware optimizer and Triton autotune block sizes.

The hybrid layer pattern decides ``num_layers`` and ``mtp_num_layers`` (model settings) and,
from its ``|`` segments, ``virtual_pipeline_model_parallel_size``; this plugin therefore runs
before ``model`` and ``parallel``. Switching on multi-latent attention for MLA symbols in the
pattern is the ``mla`` plugin's job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from megaplug import Draft, PluginInfo, hookimpl

from .options import ExperimentalOptions
from .rules import CHECKS, DERIVATIONS, NORMALIZATIONS

if TYPE_CHECKING:
    from megaplug._registry import FlagDeclarations

megaplug_plugin = PluginInfo(
    name="experimental",
    description="Layer specs, hybrid layer patterns, precision-aware optimizer, Triton autotune.",
    before=("model", "parallel"),
)


@hookimpl
def add_args(flags: "FlagDeclarations") -> None:
    """Declare the experimental settings."""
    flags.add_options(ExperimentalOptions)


@hookimpl
def normalize(config: Draft) -> None:
    """Migrate the deprecated hybrid pattern spellings to ``--hybrid-layer-pattern``."""
    for normalization in NORMALIZATIONS:
        normalization(config)


@hookimpl
def derive(config: Draft) -> None:
    """Derive layer counts, MTP depths and virtual pipeline stages from the hybrid pattern."""
    for derivation in DERIVATIONS:
        derivation(config)


@hookimpl
def validate(config: Draft) -> None:
    """Report contradictions between the hybrid pattern and the pipeline flags."""
    for check in CHECKS:
        check(config)
