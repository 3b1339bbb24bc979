"""The ``model`` plugin: what the network looks like.

Declares the network-size, attention, position-embedding, activation, normalization,
multi-token-prediction, vision, biencoder, heterogeneous-layer and wide-residual flags.
Derives the layer counts, ``ffn_hidden_size`` and ``kv_channels`` (other plugins read
them, e.g. ``moe`` sizes experts from ``ffn_hidden_size``), maps the deprecated rotary
flag to ``--position-embedding-type rope``, and checks the model's consistency.

The ``experimental`` plugin runs first: it derives ``num_layers`` and ``mtp_num_layers``
from ``--hybrid-layer-pattern``, which this plugin then treats like given values.
"""

from __future__ import annotations

from megaplug import PluginInfo, Rules

megaplug_plugin = PluginInfo(
    name="model",
    description="Network shape, attention, position embeddings, activations and norms.",
    options=f"{__name__}.options:ModelOptions",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(
        # a heterogeneous layer config is read and compared with the flags as given
        normalize=(f"{__name__}.heterogeneous:NORMALIZE",),
        derive=(f"{__name__}.derivations:DERIVE",),
        validate=(f"{__name__}.checks:VALIDATE",)),
)
