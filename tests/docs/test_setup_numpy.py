"""The set-up installs numpy beside CPU torch: without it every torch import warns."""

import subprocess
import sys

import pytest


def test_importing_torch_warns_about_nothing():
    pytest.importorskip("torch")  # the train extra; scripts/setup.sh installs it
    done = subprocess.run([sys.executable, "-c", "import numpy, torch; torch.zeros(2).numpy()"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "NumPy" not in done.stderr, done.stderr
