"""megaplug-preflight: reject at resolve time what Megatron only rejects once the job runs.

Megatron checks its arguments twice: in ``validate_args`` (which megaplug reproduces), and
again when every rank builds its model configuration (``TransformerConfig.__post_init__``,
``core_transformer_config_from_args``) -- after the scheduler has allocated the nodes and
every rank has imported torch. This plugin ports that second round, without importing
torch or megatron.core: ``--num-attention-heads 6 --tensor-model-parallel-size 4`` fails
``megaplug resolve`` on a laptop instead of a 512-GPU job.

It is active by default. Turn it off with ``-p no:preflight`` (or ``MEGAPLUG_DISABLE=preflight``),
or keep it loaded but silent with the environment switch ``MEGAPLUG_PREFLIGHT=0``.
"""

from __future__ import annotations


from megaplug import Draft, PluginInfo, Rules

#: The environment switch: ``0``, ``false``, ``no`` or ``off`` turn the checks off.
SWITCH = "MEGAPLUG_PREFLIGHT"
_OFF = frozenset({"0", "false", "no", "off"})


def enabled(config: Draft) -> bool:
    """Whether the checks run: on unless the target environment sets ``MEGAPLUG_PREFLIGHT``
    to an off value (the Megatron facade sets it, to keep Megatron's acceptance)."""
    value = config.env.getenv(SWITCH)
    return value is None or value.strip().lower() not in _OFF


rules = Rules()
# named, not imported: its ~20 modules are imported only where the checks run (the
# Megatron facade turns them off by default)
rules.validate("megaplug_preflight.checks:CHECKS", when=enabled)

megaplug_plugin = PluginInfo(
    name="preflight",
    description="Pre-flight: the model-configuration checks Megatron makes only when it "
                "builds the model.",
    version="0.1.0",
    # Checks run after every plugin's derivations; these edges order the built-ins whose
    # values they read. Feature plugins (moe, mla, inference, ...) may be absent, so their
    # settings are read with config.get and no edge names them.
    after=("model", "parallel", "precision", "training", "experimental"),
    rules=rules,
)

