"""Importing the package imports none of its other modules: `megaplug list` needs only
``__init__``; the rule modules are named by reference and imported once a resolve runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import megaplug_fsdp as plugin

_IMPORTED = ("import json, sys; import megaplug_fsdp; print(json.dumps(sorted("
             "m for m in sys.modules if m.partition('.')[0] == 'megaplug_fsdp')))")


def test_importing_the_package_imports_only_its_init():
    done = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout) == ["megaplug_fsdp"]


def test_every_named_group_of_rules_names_rules():
    steps = [step for steps in plugin.megaplug_plugin.rules.steps.values() for step in steps]
    groups = [step for step in steps if step.group is not None]
    assert groups
    for group in groups:
        rules = group.rules()
        assert rules and all(callable(rule.function) and rule.name for rule in rules), group.group
