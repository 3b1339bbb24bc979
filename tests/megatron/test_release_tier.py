"""The installed Megatron release's own parse_args + validate_args against megaplug told that
release (``--assume megatron_core=VERSION``), on every shared parity configuration the
release accepts: the same keys, equal values of identical types, the same TransformerConfig
from the release's own core_transformer_config_from_args.

The comparison is scripts/megatron-release-compare.py's (which runs it for releases whose
wheels carry no ``megatron/training``, from their git tags); this tier runs it against the
megatron-core it is built with, in process, and against the older wheels installed beside it
by scripts/megatron-env.sh (0.17.1), each in a process of its own with its code first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import reference as ref

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "megatron-release-compare.py"
_spec = importlib.util.spec_from_file_location("megatron_release_compare", SCRIPT)
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


RELEASES_DIR = Path(os.environ.get("MEGAPLUG_MEGATRON_RELEASES",
                                   Path.home() / ".cache" / "megaplug"))
#: Older releases whose wheels carry megatron/training: version -> the code to put first.
OLDER_RELEASES = {"0.17.1": RELEASES_DIR / "megatron-core-0.17.1"}


@pytest.mark.parametrize("version", list(OLDER_RELEASES))
def test_an_older_release_and_megaplug_at_that_release_agree(version, tmp_path):
    code = OLDER_RELEASES[version]
    if not (code / "megatron" / "training" / "arguments.py").exists():
        pytest.fail(f"{code} lacks megatron-core {version}'s code: run scripts/megatron-env.sh")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    out = tmp_path / "result.json"
    done = subprocess.run([sys.executable, "-W", "ignore", str(SCRIPT), version, "--json",
                           str(out)], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())["results"]
    valid = {name: result["differences"] for name, result in results.items()
             if "differences" in result}
    assert len(valid) >= 20, "too few parity configurations ran"
    assert {name: found for name, found in valid.items() if found} == {}
