"""Megatron's argument table: what its ``validate_args`` prints last, on rank 0.

Every Megatron-LM release from core_v0.13 to main prints it with the same ``_print_args``::

    ------------------------ arguments ------------------------
      accumulate_allreduce_grads_in_fp32 .............. False
      ...
    -------------------- end of arguments ---------------------

one line per attribute of the namespace -- two spaces, the name, ``48 - len(name)`` dots
(none past 48), the value's ``str`` -- sorted by the whole line, lower-cased. Log tools parse
it and people read it to check a run, so the facade prints it byte for byte, for the values
megaplug resolved, at the point Megatron does: when validation has passed. The Megatron tier
holds it byte-identical to Megatron's own output (``tests/megatron/test_argument_table.py``).
Which release the arguments are for -- the exact version in force -- is said in one line on
standard error, before it (:func:`release_note`), where no log tool parsing the table reads.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Mapping, TextIO

#: The title Megatron's ``validate_args`` passes to ``_print_args``.
TITLE = "arguments"
#: The column the dots pad each name to.
_NAME_COLUMN = 48


def argument_table(args: argparse.Namespace, title: str = TITLE) -> str:
    """The table as Megatron's ``_print_args(title, args)`` prints it, ending in a newline."""
    lines = ["  {} {} {}".format(name, "." * (_NAME_COLUMN - len(name)), value)
             for name, value in vars(args).items()]
    lines.sort(key=str.lower)
    return "".join((f"------------------------ {title} ------------------------\n",
                    *(line + "\n" for line in lines),
                    f"-------------------- end of {title} ---------------------\n"))


def process_rank(environ: Mapping[str, str]) -> int:
    """The rank Megatron's ``is_rank0`` reads (megatron.core's ``safe_get_rank``):
    torch.distributed's when it is initialized, else ``RANK``, else ``SLURM_PROCID`` in a
    SLURM job (``SLURM_NTASKS`` set), else 0; a value that is no integer counts as 0."""
    distributed = sys.modules.get("torch.distributed")  # never imported for this
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank())
    variable = "RANK" if "RANK" in environ else "SLURM_PROCID"
    if variable == "SLURM_PROCID" and "SLURM_NTASKS" not in environ:
        return 0
    try:
        return int(environ.get(variable, 0))
    except ValueError:
        return 0


def release_note(release: str) -> str:
    """The line naming the release the table's arguments are for (``release``: the release in
    force and where it came from, ``TargetEnvironment.release_source()``)."""
    return f"megaplug: arguments for Megatron {release}\n"


def print_argument_table(args: argparse.Namespace, environ: Mapping[str, str],
                         stream: TextIO | None = None, release: str | None = None,
                         errors: TextIO | None = None) -> None:
    """Print the table on standard output (or ``stream``) when this process is rank 0; given
    the ``release`` in force, first a line naming it on standard error (or ``errors``), so
    that the table itself stays Megatron's, byte for byte."""
    if process_rank(environ) != 0:
        return
    if release is not None:
        note = sys.stderr if errors is None else errors
        note.write(release_note(release))
        note.flush()
    out = sys.stdout if stream is None else stream
    out.write(argument_table(args))
    out.flush()
