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

from importlib import import_module

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

megaplug_plugin = PluginInfo(
    name="model",
    description="Network shape, attention, position embeddings, activations and norms.",
    # named by module: importing the plugin to list or document it imports no rules
    rules=Rules(
        # a heterogeneous layer config is read and compared with the flags as given
        normalize=(f"{__name__}.heterogeneous:NORMALIZE",),
        derive=(f"{__name__}.derivations:DERIVE",),
        validate=(f"{__name__}.checks:VALIDATE",)),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare every model flag."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import ModelOptions

    flags.add_options(ModelOptions)


__all__ = ["AttnBackend", "ModelOptions", "megaplug_plugin"]

#: The names this package offers from its modules, and the module each lives in.
_FROM_MODULE = {"AttnBackend": "types", "ModelOptions": "options"}


def __getattr__(name: str) -> object:
    if name in _FROM_MODULE:  # imported on first use, like the rules
        return getattr(import_module(f"{__name__}.{_FROM_MODULE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
