"""megaplug-memory: each rank's peak GPU memory, predicted at resolve time.

A torch-free estimator (``estimator``) of what Megatron allocates on each rank -- weights,
gradients, optimizer states, activations per pipeline schedule, the peak's short-lived
buffers -- from the resolved arguments; ``megaplug memory`` prints it (through the
``megaplug.memory`` entry point, see ``report``), and a pre-flight check refuses a launch
whose worst rank will not fit when the target GPU's memory is known.

The check follows pre-flight's switch: ``MEGAPLUG_PREFLIGHT=0`` turns it off with the rest;
``-p no:memory`` unloads the plugin. It runs only where the target GPU's memory is known
(``--assume-device-memory``, or NVML on a GPU node).
"""

from __future__ import annotations

from megaplug import Draft, PluginInfo, Rules

#: Pre-flight's environment switch, which this check follows.
SWITCH = "MEGAPLUG_PREFLIGHT"
_OFF = frozenset({"0", "false", "no", "off"})


def enabled(config: Draft) -> bool:
    """Whether the check runs: as pre-flight does (on unless ``MEGAPLUG_PREFLIGHT`` is off),
    and only where the target GPU's memory is known -- elsewhere the estimator is not even
    imported."""
    value = config.env.getenv(SWITCH)
    if value is not None and value.strip().lower() in _OFF:
        return False
    return config.env.memory() is not None


rules = Rules()
rules.validate("megaplug_memory.checks:CHECKS", when=enabled)

megaplug_plugin = PluginInfo(
    name="memory",
    description="Per-rank peak GPU memory; pre-flight refuses a launch that will not fit.",
    version="0.1.0",
    # reads the model, parallel, precision and training values after their derivations;
    # feature plugins' settings (moe, mla) are read with get and need no edge
    after=("model", "parallel", "precision", "training"),
    rules=rules,
)
