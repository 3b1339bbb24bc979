"""Megatron's argument table, printed by the facade and the switch, against Megatron's own.

Megatron's ``validate_args`` ends by printing every argument (``_print_args``); people read
that table to check a run and log tools parse it. For every shared parity configuration the
pinned release accepts, the table megaplug prints is byte for byte Megatron's own printout --
leaving out only the lines of the settings in which the pinned release and the newer
revision megaplug follows differ (derived from the two parsers, as test_drop_in does) -- and
all of it is what Megatron's own ``_print_args`` prints for megaplug's namespace.
"""

from __future__ import annotations

import contextlib
import io

import pytest

import reference as ref
from test_drop_in import ACCEPTED, MEGAPLUG_TABLE, ONLY_IN_MEGAPLUG, ONLY_IN_RELEASE, \
    _default_differs

TITLE = "------------------------ arguments ------------------------\n"
END = "-------------------- end of arguments ---------------------\n"


def _table_in(printout: str) -> str:
    """The argument table in a process's standard output (which must hold exactly one)."""
    assert printout.count(TITLE) == 1 and printout.count(END) == 1, printout[-2000:]
    start = printout.index(TITLE)
    return printout[start:printout.index(END, start) + len(END)]


def megatron_table(case: dict) -> str:
    """What Megatron's own parse_args + validate_args print for the case: its table."""
    import megatron.training.arguments as arguments

    out = io.StringIO()
    with ref.targeting(case), contextlib.redirect_stdout(out):
        args = arguments.parse_args()
        arguments.validate_args(args, dict(case.get("args_defaults") or {}))
    return _table_in(out.getvalue())


def megaplug_printout(case: dict) -> tuple[object, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args = ref.megaplug_args(case)
    return args, out.getvalue()


def _revision_difference(line: str, given: set[str]) -> bool:
    """A line of a setting the two revisions declare differently (one has it, or its
    default differs and the case leaves it at its default)."""
    name = line.split()[0]
    if name in ONLY_IN_RELEASE or name in ONLY_IN_MEGAPLUG:
        return True
    return _default_differs(name) and not (
        set(MEGAPLUG_TABLE.by_dest[name][0].option_strings) & given)


@pytest.mark.parametrize("path", ACCEPTED, ids=[p.stem for p in ACCEPTED])
def test_the_table_is_megatrons_byte_for_byte(path):
    import megatron.training.arguments as arguments

    case = ref.load_case(path)
    args, printed = megaplug_printout(case)
    assert printed == _table_in(printed)  # the table, and nothing else, on standard output
    # all of it as Megatron's own _print_args prints megaplug's namespace
    theirs_of_ours = io.StringIO()
    with ref.targeting(case), contextlib.redirect_stdout(theirs_of_ours):
        arguments._print_args("arguments", args)
    assert printed == theirs_of_ours.getvalue()
    # and Megatron's own printout of the case, line for line
    given = {token.split("=", 1)[0] for token in case["argv"] if token.startswith("--")}
    expected = [line for line in megatron_table(case).splitlines(keepends=True)
                if not (line.startswith("  ") and _revision_difference(line, given))]
    actual = [line for line in printed.splitlines(keepends=True)
              if not (line.startswith("  ") and _revision_difference(line, given))]
    assert actual == expected


def test_the_table_is_printed_on_rank_0_only():
    case = ref.load_case(ACCEPTED[0])
    on_rank_1 = {**case, "env": {**(case.get("env") or {}), "RANK": "1"}}
    assert megaplug_printout(on_rank_1)[1] == ""
    assert megaplug_printout(case)[1].startswith(TITLE)


@pytest.mark.parametrize("environ", [
    {}, {"RANK": "3"}, {"RANK": "x"}, {"SLURM_PROCID": "2"}, {"SLURM_NTASKS": "4"},
    {"SLURM_PROCID": "2", "SLURM_NTASKS": "4"}, {"RANK": "1", "SLURM_PROCID": "0",
                                                   "SLURM_NTASKS": "2"}])
def test_the_rank_that_prints_is_megatrons(environ, monkeypatch):
    import os
    import warnings

    from megatron.core._rank_utils import safe_get_rank

    from megaplug.megatron._table import process_rank

    for variable in ("RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in environ.items():
        monkeypatch.setenv(variable, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Megatron warns when it falls back to rank 0
        assert process_rank(os.environ) == safe_get_rank()
