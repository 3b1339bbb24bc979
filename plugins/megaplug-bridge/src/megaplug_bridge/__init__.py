"""megaplug-bridge: one launch in every config dialect.

``megaplug export --to mlm-config`` writes the YAML Megatron-LM's own
``pretrain_cfg_container_from_args(args).to_yaml()`` writes for the launch;
``megaplug import mlm-config FILE`` prints the Megatron-LM flags that reproduce such a
YAML; and every command that reads a config file (``--config``, a SOURCE) reads one too.
The modules import nothing heavy at import time: Megatron's classes only when ``export``
builds a container (:mod:`megaplug_bridge.mlm_config`).
"""
