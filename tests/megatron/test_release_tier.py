"""The installed Megatron release's own parse_args + validate_args against megaplug told that
release (``--assume megatron_core=VERSION``), on every shared parity configuration the
release accepts: the same keys, equal values of identical types, the same TransformerConfig
from the release's own core_transformer_config_from_args.

The comparison is scripts/megatron-release-compare.py's (which runs it for releases whose
wheels carry no ``megatron/training``, from their git tags); this tier runs it against the
megatron-core it is built with.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import reference as ref

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "megatron_release_compare", ROOT / "scripts" / "megatron-release-compare.py")
compare = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = compare
_spec.loader.exec_module(compare)


def _installed_version() -> str:
    from megatron.core import package_info

    return package_info.__version__


VERSION = _installed_version()
CASES = compare.accepted_cases(ref.PARITY_DIR)


def _kitchen_installed() -> bool:
    return importlib.util.find_spec("kitchen") is not None


#: Megatron always declares the kitchen flags; megaplug's kitchen plugin adds them only where
#: the kitchen package is installed (docs/megatron-compat.md, deliberate differences).
KITCHEN_KEYS = ("missing kitchen_config_file", "missing kitchen_recipe_number")


@pytest.mark.parametrize("name,case", CASES, ids=[name for name, _ in CASES])
def test_release_and_megaplug_at_that_release_agree(name, case):
    result = compare.compare_case(case, VERSION)
    if "release_rejects" in result:
        pytest.skip(f"megatron-core {VERSION} refuses it: {result['release_rejects']}")
    differences = result["differences"]
    if not _kitchen_installed():
        differences = [line for line in differences if line not in KITCHEN_KEYS]
    assert differences == []
