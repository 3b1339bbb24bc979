"""Every shared Megatron parity case resolves to exactly what Megatron resolved."""

from __future__ import annotations

import pytest

from parity import PARITY_DIR, case_files, run_case

CASES = case_files()


def test_parity_cases_are_present():
    assert CASES, f"no parity cases found under {PARITY_DIR}"


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_parity_case(path):
    outcome = run_case(path)
    assert outcome.ok, "\n".join(outcome.mismatches)
