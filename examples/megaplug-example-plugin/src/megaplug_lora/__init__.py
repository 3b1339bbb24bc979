"""megaplug-example-plugin: LoRA adapter settings, as a template for third-party plugins.

A complete plugin in three modules:

* :class:`LoraOptions` (in ``options.py``) declares the flags, a hidden deprecated alias
  and a computed value; the ``add_args`` hook imports it and hands it to the kernel (a
  process that reads the flag table from megaplug's cache never imports it);
* ``rules.py`` holds the plugin's rules, each a small named function listed in the table
  of its phase (``NORMALIZE``, ``DERIVE``, ``VALIDATE``): a normalization migrates the
  alias ``--lora-r`` to ``--lora-rank`` (warning, provenance), a derivation computes
  ``lora_scaling = lora_alpha / lora_rank``, and checks report problems, including ones
  that depend on core values;
* ``megaplug_plugin`` says who it is, that its rules run after the ``model`` plugin's (its
  checks read ``hidden_size``, which ``model`` owns), and names its tables of rules, which
  the kernel imports only when a resolve runs them.

The kernel runs the rules, and names the rule in the provenance of each value it sets and
in each problem it reports.
"""

from megaplug import PluginInfo, Rules

__version__ = "0.1.0"


megaplug_plugin = PluginInfo(
    name="lora",
    description="Low-rank adapters (LoRA): train small rank-r updates of frozen linear layers.",
    options="megaplug_lora.options:LoraOptions",
    version=__version__,
    after=("model",),
    # named, not imported: the kernel imports megaplug_lora.rules when a resolve first runs
    # a phase, so a process that only lists or documents plugins never does
    rules=Rules(normalize=("megaplug_lora.rules:NORMALIZE",),
                derive=("megaplug_lora.rules:DERIVE",),
                validate=("megaplug_lora.rules:VALIDATE",)),
)
