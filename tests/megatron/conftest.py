"""The Megatron tier: tests that use Megatron-LM's released code as the reference.

They run in the Python 3.12 environment built by ``scripts/megatron-tier.sh`` (the README's
test command runs it after the main suite). Where megatron-core is not installed -- the main
Python 3.11 suite -- every module here is skipped at collection.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

pytest.importorskip("megatron.training.arguments",
                    reason="megatron-core is not installed: run scripts/megatron-tier.sh")
