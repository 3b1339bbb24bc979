"""The Megatron tier of pre-flight's tests: Megatron-LM's released code is the reference.

They run in the Python 3.12 environment built by ``scripts/megatron-tier.sh``; where
megatron-core is not installed (the main Python 3.11 suite) every module here is skipped.
"""

import sys
from pathlib import Path

import pytest

pytest.importorskip("megatron.training.arguments",
                    reason="megatron-core is not installed: run scripts/megatron-tier.sh")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from preflight_reference import TALLY  # noqa: E402  (importable only after the line above)


def pytest_terminal_summary(terminalreporter):
    for kind, (count, total) in sorted(TALLY.items()):
        terminalreporter.write_line(f"preflight: {kind}: {count}/{total}")
