"""Raises of Megatron's forward, dispatch and optimizer-step code that the configuration and
the environment alone decide: what kills a job at its first iteration, after start-up.

Found by reading each release's module code (``scripts/first_step_raises.py`` lists every
``raise`` of the MoE layer, router, token dispatchers and experts, and of the optimizer step,
per release, with the verdict on each: decided by the configuration, or by data):

- ``MoELayer.forward`` (0.13-0.19): ``ValueError: During training, performance may degrade
  if MoE and tensor parallelism are enabled without also enabling sequence parallelism``.
- ``RouterGatingLinearFunction.forward`` (``moe_utils.py``, 0.13-0.16): reads
  ``te_general_gemm``, which only the Transformer Engine import defines: without Transformer
  Engine every MoE router dies with ``NameError`` at its first forward (0.17 sets the name
  to None when the import fails).
"""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import TRANSFORMER_ENGINE, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

#: Appended to these problems: the launch builds its model and dies later.
AT_FIRST_STEP = "Megatron {release} would raise this at the first training iteration"


def _release(config: Draft) -> str:
    return config.env.release_line("megatron_core")


def _trains(config: Draft) -> bool:
    return not config.get("skip_train") and bool(config.get("train_iters") or config.get(
        "train_samples"))


def moe_with_tensor_parallelism_needs_sequence_parallelism(config: Draft) -> None:
    """MoE with tensor parallelism trains only with sequence parallelism (every release).

    ``MoELayer.forward`` raises at the first training iteration otherwise."""
    tp = config.get("tensor_model_parallel_size") or 1
    if not view.experts(config) or tp <= 1 or config.get("sequence_parallel"):
        return
    if not _trains(config):
        return
    config.error(
        f"MoE with {shown(config, 'tensor_model_parallel_size')} needs --sequence-parallel "
        "while training (ValueError: During training, performance may degrade if MoE and "
        "tensor parallelism are enabled without also enabling sequence parallelism); "
        + AT_FIRST_STEP.format(release="0.13-0.19 (every release)"),
        flags=("num_experts", "tensor_model_parallel_size", "sequence_parallel"),
        hint="add --sequence-parallel")


def moe_router_needs_transformer_engine_before_0_17(config: Draft) -> None:
    """Megatron 0.13.0-0.16.1's MoE router needs Transformer Engine to run at all.

    Its gate names ``te_general_gemm``, defined only when Transformer Engine imports:
    without it the first forward raises ``NameError``."""
    if not view.experts(config) or config.env.megatron.at_least("0.17.0"):
        return
    env = config.env
    if env.package_version(TRANSFORMER_ENGINE) is not None or not env.knows_package(
            TRANSFORMER_ENGINE):
        return  # installed, or unknown on this machine (a login node): not judged
    config.error(
        "the MoE router of this release needs Transformer Engine, not installed (NameError: "
        "name 'te_general_gemm' is not defined, in its gating); "
        + AT_FIRST_STEP.format(release=_release(config)),
        flags=("num_experts",),
        hint="install Transformer Engine, or use Megatron 0.17.0 or later for MoE without it")


CHECKS: tuple[Check, ...] = (
    moe_with_tensor_parallelism_needs_sequence_parallelism,
    moe_router_needs_transformer_engine_before_0_17,
)
