"""megaplug-moe: mixture-of-experts flags, derivations and checks for megaplug.

Adds the ``--num-experts`` / ``--moe-*`` / expert-parallel flags. Derives
``expert_tensor_parallel_size`` (from the dense tensor-parallel size) and
``moe_ffn_hidden_size`` (from ``ffn_hidden_size``, which the ``model`` plugin derives,
hence ``after=("model", "parallel")``), turns on ``--no-load-optim`` / ``--no-load-rng``
for upcycling (after the ``checkpointing`` plugin's own checks of them, as in Megatron),
and checks expert counts, kernels and incompatible combinations, including those with
built-in settings.
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, Rules


def overlaps_expert_parallel_comm(config: Draft) -> bool:
    """Whether expert-parallel communication overlaps compute (it wants more connections)."""
    return bool(config.overlap_moe_expert_parallel_comm)


# named, not imported: each module is imported when a resolve first runs the phase
rules = Rules(normalize=("megaplug_moe.derivations:NORMALIZATIONS",),
              derive=("megaplug_moe.derivations:DERIVATIONS",),
              validate=("megaplug_moe.checks:CHECKS", "megaplug_moe.across:CHECKS"))
rules.supersede("parallel.check_cuda_device_max_connections",
                when=overlaps_expert_parallel_comm)

megaplug_plugin = PluginInfo(
    name="moe",
    description="Mixture of experts: experts, routing, token dispatch, expert parallelism.",
    options="megaplug_moe.options:MoeOptions",
    version="0.1.0",
    after=("model", "parallel", "checkpointing"),
    rules=rules,
)
