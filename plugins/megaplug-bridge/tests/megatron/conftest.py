"""The Megatron tier of megaplug-bridge: Megatron-LM's own config container is the judge.

Run in the Python 3.12 environment of ``scripts/megatron-tier.sh``; where megatron-core is
not installed (the main suite) every module here is skipped. The shared parity cases and
their runner are the core tier's (``tests/megatron/reference.py``).
"""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

# first (Megatron notes at import whether omegaconf is there): omegaconf and
# Megatron-Bridge, installed beside the environment by scripts/megatron-env.sh;
# after it on the path, so megatron-core stays the environment's own
INTEROP_DIR = os.environ.get("MEGAPLUG_MEGATRON_INTEROP", str(
    Path(os.environ.get("MEGAPLUG_MEGATRON_RELEASES", Path.home() / ".cache" / "megaplug"))
    / "megaplug-interop-py312"))

try:  # finds megatron.core without importing it (only its namespace parent)
    _CORE = importlib.util.find_spec("megatron.core")
except ModuleNotFoundError:
    _CORE = None
if _CORE is None:  # the main suite: no Megatron, and its interop directory stays off the path
    pytest.skip("megatron-core is not installed: run scripts/megatron-tier.sh",
                allow_module_level=True)
if os.path.isdir(INTEROP_DIR):
    sys.path.append(INTEROP_DIR)
# transformers is importable there, so a case's Hugging Face tokenizer would be fetched
# from the Hub (and retried, with sleeps, on a machine without network); the cases'
# tokenizer files are not here either way. Offline, read once at import (the cases'
# environments, which replace os.environ, do not undo it).
os.environ["HF_HUB_OFFLINE"] = "1"
try:
    import huggingface_hub.constants  # noqa: F401
except ImportError:
    pass
pytest.importorskip("megatron.training.argument_utils",
                    reason="megatron-core is not installed: run scripts/megatron-tier.sh")

_ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(_ROOT / "tests" / "megatron"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mlm_reference import TALLY  # noqa: E402  (importable only after the lines above)


def pytest_terminal_summary(terminalreporter):
    for kind, (count, total) in sorted(TALLY.items()):
        terminalreporter.write_line(f"megaplug-bridge: {kind}: {count}/{total}")
