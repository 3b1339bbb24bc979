"""The Megatron tier of the RL plugin's tests: Megatron-LM's released code is the reference.

They run in the Python 3.12 environment built by ``scripts/megatron-tier.sh``; where
megatron-core is not installed (the main Python 3.11 suite) every module here is skipped.
"""

import pytest

pytest.importorskip("megatron.training.arguments",
                    reason="megatron-core is not installed: run scripts/megatron-tier.sh")
