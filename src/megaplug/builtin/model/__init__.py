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

from megaplug import FlagDeclarations, PluginInfo, Rules, hookimpl

from .checks import CHECKS
from .derivations import DERIVATIONS
from .heterogeneous import check_against_heterogeneous_config, load_heterogeneous_config
from .types import AttnBackend

megaplug_plugin = PluginInfo(
    name="model",
    description="Network shape, attention, position embeddings, activations and norms.",
    rules=Rules(
        # a heterogeneous layer config is read and compared with the flags as given
        normalize=(load_heterogeneous_config, check_against_heterogeneous_config),
        derive=DERIVATIONS, validate=CHECKS),
)


@hookimpl
def add_args(flags: FlagDeclarations) -> None:
    """Declare every model flag."""
    # imported here, not at the top: a flag table read from the snapshot needs none
    from .options import ModelOptions

    flags.add_options(ModelOptions)


__all__ = ["AttnBackend", "ModelOptions", "megaplug_plugin"]


def __getattr__(name: str) -> object:
    if name == "ModelOptions":  # from the options module, imported on first use
        from . import options

        return getattr(options, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
