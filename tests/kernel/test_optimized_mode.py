"""Validation does not depend on ``assert``: the key validation tests pass under ``python -O``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(sys.flags.optimize > 0, reason="already running under -O")
def test_validation_tests_pass_under_python_dash_o():
    modules = [str(HERE / "test_pipeline.py"), str(HERE / "test_flags.py")]
    env = dict(os.environ,
               PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run(
        [sys.executable, "-O", "-m", "pytest", "-q", "-o", "addopts=--import-mode=importlib",
         "-p", "no:cacheprovider", *modules],
        capture_output=True, text=True, env=env, cwd=HERE.parents[1])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
    # the subprocess really ran optimized: asserts in library code would vanish there
    check = subprocess.run([sys.executable, "-O", "-c", "import sys; print(sys.flags.optimize)"],
                           capture_output=True, text=True)
    assert check.stdout.strip() == "1"
