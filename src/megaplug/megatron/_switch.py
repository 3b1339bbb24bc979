"""The switch: run an unmodified Megatron-LM entry script on megaplug's arguments.

``python -m megaplug.megatron pretrain_gpt.py ARGS...`` (also under ``torchrun``) imports
Megatron's ``megatron.training.arguments``, puts megaplug's functions in place of its
argument functions -- in that module and in every Megatron module that already imported
them by name -- and then runs the script as ``__main__``. Every
``from megatron.training.arguments import parse_and_validate_args`` in Megatron, before or
after, gets megaplug's.

Under the switch megaplug runs inside the training job: the pre-flight checks are on unless
``MEGAPLUG_PREFLIGHT`` turns them off (the log says so once, on rank 0), and the target they
check is this process -- a package that does not import here is absent, and the GPU is the
one this process sees. Every rank resolves the same command line against the same kind of
node, so every rank gives the same verdict, before any rank builds a model.
"""

from __future__ import annotations

import importlib
import runpy
import sys
from types import ModuleType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence

MEGATRON_ARGUMENTS = "megatron.training.arguments"


def replacements() -> dict[str, Any]:
    """Megatron's names in ``megatron.training.arguments`` -> megaplug's functions."""
    from . import (
        GROUP_ADDERS,
        add_megatron_arguments,
        compress_ratios_type,
        la_freq_type,
        moe_freq_type,
        no_rope_freq_type,
        parse_and_validate_args,
        parse_args,
        tuple_type,
        validate_args,
        validate_model_config_args_from_heterogeneous_config,
    )
    from . import _arguments

    functions: dict[str, Any] = {name: getattr(_arguments, name) for name in GROUP_ADDERS}
    functions.update({
        "add_megatron_arguments": add_megatron_arguments,
        "compress_ratios_type": compress_ratios_type,
        "la_freq_type": la_freq_type,
        "moe_freq_type": moe_freq_type,
        "no_rope_freq_type": no_rope_freq_type,
        "parse_and_validate_args": parse_and_validate_args,
        "parse_args": parse_args,
        "tuple_type": tuple_type,
        "validate_args": validate_args,
        "validate_model_config_args_from_heterogeneous_config":
            validate_model_config_args_from_heterogeneous_config,
    })
    return functions


def install() -> ModuleType:
    """Put megaplug's argument functions in place of Megatron's; returns Megatron's module.

    Only names Megatron's module defines are replaced (a release without a group adder
    keeps not having it). Idempotent.
    """
    arguments = importlib.import_module(MEGATRON_ARGUMENTS)
    originals: dict[int, Any] = {}
    for name, function in replacements().items():
        original = getattr(arguments, name, None)
        if original is None or original is function:
            continue
        originals[id(original)] = function
        setattr(arguments, name, function)
    # Modules imported while Megatron's arguments module loaded hold the originals by name.
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("megatron"):
            continue
        for attribute, value in list(vars(module).items()):
            replacement = originals.get(id(value))
            if replacement is not None:
                setattr(module, attribute, replacement)
    return arguments


def run(argv: Sequence[str]) -> None:
    """Install the switch and run ``argv[0]`` (a script path) as ``__main__`` with the
    remaining arguments, as ``python SCRIPT ARGS...`` would."""
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m megaplug.megatron SCRIPT.py [ARGS...]\n\n"
              "Run a Megatron-LM entry script (pretrain_gpt.py, ...) unmodified, with megaplug "
              "in place of megatron.training.arguments.", file=sys.stderr)
        raise SystemExit(0 if argv else 2)
    from pathlib import Path  # here only: pathlib (and urllib.parse) cost every process

    script = Path(argv[0])
    if not script.is_file():
        print(f"megaplug.megatron: no such script: {script}", file=sys.stderr)
        raise SystemExit(2)
    # As `python SCRIPT`: the script's folder first on sys.path (Megatron-LM's root holds
    # the `megatron` package its entry scripts import).
    sys.path.insert(0, str(script.resolve().parent))
    sys.argv = [str(script), *argv[1:]]
    try:
        install()
    except ImportError as error:  # no Megatron here: say so in a line, not a traceback
        print(f"megaplug.megatron: cannot import {MEGATRON_ARGUMENTS} ({error}); run the "
              "script from a Megatron-LM checkout, or install megatron-core", file=sys.stderr)
        raise SystemExit(2) from None
    from . import _facade
    from ._facade import ConfigError

    _facade.UNDER_SWITCH = True
    _say_when_preflight_is_off()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except ConfigError as error:  # every problem, before any model is built: the report,
        print(f"error: {error}", file=sys.stderr)  # status 2 (argparse's, the CLI's)
        raise SystemExit(2) from None


def _say_when_preflight_is_off() -> None:
    """Under the switch pre-flight is on; a job that turns it off reads so once, on rank 0,
    at the top of its log."""
    import os

    from ._facade import PREFLIGHT_SWITCH, preflight_on
    from ._table import process_rank

    if not preflight_on(os.environ) and process_rank(os.environ) == 0:
        print(f"megaplug: pre-flight checks are off ({PREFLIGHT_SWITCH}="
              f"{os.environ.get(PREFLIGHT_SWITCH)}): what Megatron refuses only when it builds "
              "the model is not checked before", flush=True)
