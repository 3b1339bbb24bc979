"""Real-plugin validation does not depend on ``assert``: same problems under ``python -O``.

The kernel's own test (``tests/kernel/test_optimized_mode.py``) covers toy plugins; this
one runs ``test_all_problems.py`` — every built-in and installed feature plugin — in an
optimized interpreter, and compares its problem reports with this interpreter's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
MODULE = HERE / "test_all_problems.py"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MEGAPLUG_") and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(HERE.parent / "parity"),
                                         os.environ.get("PYTHONPATH", "")])
    return env


def _reports(*flags: str) -> dict:
    result = subprocess.run([sys.executable, *flags, str(MODULE)], capture_output=True,
                            text=True, env=_env(), cwd=HERE.parents[1])
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_real_plugin_validation_tests_pass_under_python_dash_o() -> None:
    result = subprocess.run(
        [sys.executable, "-O", "-m", "pytest", "-q", "-o", "addopts=--import-mode=importlib",
         "-p", "no:cacheprovider", str(MODULE)],
        capture_output=True, text=True, env=_env(), cwd=HERE.parents[1])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout


@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_optimized_interpreter_reports_the_same_problems() -> None:
    plain, optimized = _reports(), _reports("-O")
    assert plain["optimize"] == 0 and optimized["optimize"] == 1
    assert optimized["reports"] == plain["reports"]
    # every case is a rejection, so the comparison covers real checks, not empty lists
    assert len(plain["reports"]) >= 10 and all(plain["reports"].values())
