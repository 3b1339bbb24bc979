"""The tier's environment is the one it claims to be."""

import sys

import megaplug


def test_megatron_and_megaplug_share_one_interpreter():
    import megatron.core
    import megatron.training.arguments as reference

    assert sys.version_info[:2] == (3, 12)
    assert megatron.core.__version__ == "0.19.2"
    assert hasattr(reference, "validate_args")
    assert "moe" in {record.name for record in megaplug.load(())[0].plugins.active()}
