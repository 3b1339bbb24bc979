"""megaplug as Megatron-LM's ``megatron.training.arguments``.

An entry point switches with one import::

    from megaplug.megatron import parse_and_validate_args
    args = parse_and_validate_args(extra_args_provider, args_defaults={...})

or, leaving Megatron-LM's files untouched, runs through the switch
(``python -m megaplug.megatron pretrain_gpt.py ARGS...``), which puts this module's
functions in place of Megatron's. The namespace has Megatron's keys, values and value
types and pickles into checkpoints like Megatron's; every problem is reported at once
through :class:`ConfigError` (an ``AssertionError``, like Megatron's checks) instead of the
first failing ``assert`` -- a :class:`UsageError`, also a ``SystemExit`` as argparse's
error is, when the command line itself has a problem. :func:`provenance` says where each
value came from.
"""

from ._facade import (
    ConfigError,
    UsageError,
    parse_and_validate_args,
    parse_args,
    provenance,
    resolution_warnings,
    validate_args,
)
from .._errors import Problem
from .. import _startup

#: Exports imported when first used: a resolve needs neither the switch (and its
#: ``runpy``), the ``type=`` helpers Megatron's own parser code calls, nor Megatron's
#: argument groups (``GROUP_ADDERS``: the names of Megatron's ``_add_*_args`` group adders;
#: ``from megaplug.megatron import _add_tokenizer_args`` gives the one that adds Megatron's
#: tokenizer flags).
_LAZY = {"install": "._switch", "add_megatron_arguments": "._arguments",
         "GROUP_ADDERS": "._arguments", **dict.fromkeys((
             "compress_ratios_type", "la_freq_type", "moe_freq_type", "no_rope_freq_type",
             "tuple_type", "validate_model_config_args_from_heterogeneous_config"),
             "._helpers")}


def _group_adder(name: str) -> object:
    """``_add_*_args``: one of Megatron's group adders (``GROUP_ADDERS``)."""
    if name.startswith("_add_"):
        from . import _arguments

        if name in _arguments.GROUP_ADDERS:
            return getattr(_arguments, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__getattr__, __dir__ = _startup.lazy_exports(__name__, _LAZY, globals(),
                                            fallback=_group_adder)

__all__ = [
    "ConfigError",
    "GROUP_ADDERS",
    "UsageError",
    "Problem",
    "add_megatron_arguments",
    "install",
    "compress_ratios_type",
    "la_freq_type",
    "moe_freq_type",
    "no_rope_freq_type",
    "parse_and_validate_args",
    "parse_args",
    "provenance",
    "resolution_warnings",
    "tuple_type",
    "validate_args",
    "validate_model_config_args_from_heterogeneous_config",
]
