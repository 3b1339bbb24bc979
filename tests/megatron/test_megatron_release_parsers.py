"""Each Megatron release's own parser against megaplug targeting that release (issue 27).

For megatron-core 0.19 (this environment's) and 0.17 (its wheel's code, installed beside the
environment by scripts/megatron-env.sh and put first on PYTHONPATH), a process of its own
runs ``release_parsers.py``: megaplug must find the release by itself (the Megatron it would
import) and, on every shared parity configuration whose flags the release has, its facade's
``parse_args`` must give the release's own ``parse_args`` namespace -- the same keys, equal
values of identical types. (validate_args per release: VER-B's comparison.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RELEASES_DIR = Path(os.environ.get("MEGAPLUG_MEGATRON_RELEASES",
                                   Path.home() / ".cache" / "megaplug"))
#: release -> the code to put first on sys.path (None: this environment's own megatron-core)
RELEASES = {"0.19": None, "0.17": RELEASES_DIR / "megatron-core-0.17.1"}


def _run(code: Path | None) -> dict:
    env = dict(os.environ)
    if code is not None:
        if not (code / "megatron" / "training" / "arguments.py").exists():
            pytest.fail(f"{code} lacks megatron-core's code: run scripts/megatron-env.sh")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, str(HERE / "release_parsers.py")], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("line", list(RELEASES))
def test_the_releases_own_parse_args_is_megaplugs_at_that_release(line):
    result = _run(RELEASES[line])
    assert result["release"].startswith(line + ".")
    # megaplug finds the release by itself and targets exactly it
    assert result["megaplug"].startswith(f"{result['release']} (")
    assert len(result["cases"]) >= 20, "too few parity configurations ran"
    differing = {case: found for case, found in result["cases"].items() if found}
    assert differing == {}
