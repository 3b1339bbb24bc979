"""Test support for the parallel, precision and experimental plugins.

The three plugins are resolved on their own with a small stand-in that declares the few
settings of other built-in plugins they read (layer counts, the optimizer, the checkpoint
format...), so these tests do not depend on how the other plugins progress.
Full-stack tests use ``megaplug.load([])`` instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from typing_extensions import Annotated

import megaplug
from megaplug import Computed, ConfigError, Flag, PluginInfo, Problem, hookimpl
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.builtin import experimental, parallel, precision

ENV = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@dataclass
class _NeighbourOptions:
    num_layers: Optional[int] = None
    decoder_num_layers: Optional[int] = None
    mtp_num_layers: Optional[int] = None
    mtp_hybrid_override_pattern: Optional[str] = None
    seq_length: Optional[int] = None
    deterministic_mode: bool = False
    optimizer: str = "adam"
    ckpt_format: str = "torch_dist"
    check_for_nan_in_loss_and_grad: Annotated[
        bool, Flag("--no-check-for-nan-in-loss-and-grad")] = True
    gradient_accumulation_fusion: Annotated[bool, Flag("--no-gradient-accumulation-fusion")] = True
    add_bias_linear: Annotated[bool, Flag("--disable-bias-linear")] = True
    apply_query_key_layer_scaling: bool = False
    fp32_residual_connection: bool = False
    transformer_impl: str = "transformer_engine"
    dataloader_type: Optional[str] = None
    sequence_packing_scheduler: Optional[str] = None
    cuda_graph_modules: list[str] = field(default_factory=list)
    dist_ckpt_optim_fully_reshardable: bool = False
    distrib_optim_fully_reshardable_mem_efficient: bool = False
    use_dist_ckpt: Annotated[Optional[bool], Computed("ckpt_format is not torch")] = None


class Neighbours:
    """Stands in for the model, training and checkpointing plugins."""

    megaplug_plugin = PluginInfo(name="neighbours", description="test stand-in")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_options(_NeighbourOptions)

    @hookimpl
    def derive(self, config: megaplug.Draft) -> None:
        config.set("use_dist_ckpt", config.ckpt_format != "torch")


_KERNEL: Kernel | None = None


def kernel() -> Kernel:
    """A kernel of the three plugins under test and the stand-in, built once."""
    global _KERNEL
    if _KERNEL is None:
        plugins = [parallel, precision, experimental, Neighbours()]
        _KERNEL = Kernel(PluginSet(PluginSelection(autoload=False), builtins=plugins))
    return _KERNEL


def target(environ: Mapping[str, str], packages: Mapping[str, str | None] | None = None,
           capability: tuple[int, int] | None = (9, 0)) -> megaplug.TargetEnvironment:
    return megaplug.TargetEnvironment(
        packages={"transformer_engine": "2.17.1", "flashinfer": None, **(packages or {})},
        device_capability=capability, environ=dict(environ))


def resolve(argv: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
            packages: Mapping[str, str | None] | None = None,
            capability: tuple[int, int] | None = (9, 0)) -> megaplug.Resolved:
    """Resolve ``argv`` with the plugins under test (``env`` replaces the default ENV)."""
    environ = dict(ENV if env is None else env)
    return kernel().resolve(list(argv), environ=environ,
                            target=target(environ, packages, capability))


def problems(argv: Sequence[str] = (), **kwargs: Any) -> list[Problem]:
    """The problems a resolve reports (empty when it succeeds)."""
    try:
        resolve(argv, **kwargs)
    except ConfigError as exc:
        return list(exc.problems)
    return []


def messages(argv: Sequence[str] = (), **kwargs: Any) -> list[str]:
    """The problem messages of a resolve."""
    return [p.message for p in problems(argv, **kwargs)]


def warnings_of(resolved: megaplug.Resolved) -> list[str]:
    return [w.message for w in resolved.warnings]
