"""parity.py as a script: nothing to compare is a failure, never "0/0 parity cases match"."""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "parity.py"


def run_script(*args: str, parity_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEGAPLUG_PARITY_DIR": str(parity_dir)}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_no_cases_at_all_exits_2_and_says_where_it_looked(tmp_path):
    done = run_script(parity_dir=tmp_path / "parity")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (f"parity: no parity cases under {tmp_path / 'parity'} (the shared "
                           "Megatron cases live in ../shared/parity beside the checkout; "
                           "MEGAPLUG_PARITY_DIR names another folder)\n")


def test_a_filter_that_matches_no_case_exits_2(tmp_path):
    cases = tmp_path / "parity" / "cases"
    cases.mkdir(parents=True)
    (cases / "gpt_small.json").write_text("{}")
    done = run_script("no-such-case", "--plugin=moe", parity_dir=tmp_path / "parity")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "parity: no parity case name contains 'no-such-case'\n"
