"""Importing a built-in plugin imports none of its modules; a resolve imports its rules.

``megaplug list``, ``flags``, ``docs`` and ``completion`` import every plugin package; a
plugin names its rule tables by module (``"pkg.module:TABLE"``) so that those commands do
not pay for importing its rules. Each check runs in a fresh interpreter, where nothing else
has imported the plugin's modules yet.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

from megaplug._plugins import BUILTIN_PLUGINS

IMPORT_THEN_RESOLVE = """
import importlib, json, sys
import megaplug
from megaplug.testing import minimal_argv

package = sys.argv[1]
importlib.import_module(package)
imported = sorted(m for m in sys.modules if m.startswith(package + "."))
try:
    megaplug.resolve(minimal_argv(), environ={"RANK": "0", "WORLD_SIZE": "1"})
except megaplug.ConfigError:
    pass  # a problem elsewhere still leaves every phase run
resolved = sorted(m for m in sys.modules if m.startswith(package + "."))
print(json.dumps({"imported": imported, "resolved": resolved}))
"""


def _rule_modules(package: str) -> set[str]:
    """The modules a plugin names its rule tables by."""
    rules = importlib.import_module(package).megaplug_plugin.rules
    return {step.group.partition(":")[0]
            for steps in rules.steps.values() for step in steps if step.group is not None}


def test_every_built_in_is_checked() -> None:
    assert len(BUILTIN_PLUGINS) == 9


@pytest.mark.parametrize("package", BUILTIN_PLUGINS)
def test_importing_a_built_in_imports_no_module_of_it_until_a_resolve(package, tmp_path):
    env = {**os.environ, "MEGAPLUG_CACHE_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-c", IMPORT_THEN_RESOLVE, package],
                         capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    modules = json.loads(run.stdout)
    assert modules["imported"] == []
    rule_modules = _rule_modules(package)
    assert rule_modules  # every built-in names its rules by module
    assert rule_modules <= set(modules["resolved"])
