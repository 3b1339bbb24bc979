"""Importing the package imports none of its other modules: `megaplug list` needs only
``__init__``; the options module is imported when the flags are declared."""

from __future__ import annotations

import json
import subprocess
import sys

_IMPORTED = ("import json, sys; import megaplug_kitchen; print(json.dumps(sorted("
             "m for m in sys.modules if m.partition('.')[0] == 'megaplug_kitchen')))")


def test_importing_the_package_imports_only_its_init():
    done = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout) == ["megaplug_kitchen"]

