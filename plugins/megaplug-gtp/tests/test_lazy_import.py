"""Importing the package imports none of its other modules: `megaplug list` needs only
``__init__``; the rule modules are named by reference and imported once a resolve runs them."""

from __future__ import annotations

import json
import subprocess
import sys

import megaplug_gtp as plugin

_IMPORTED = ("import json, sys; import megaplug_gtp; print(json.dumps(sorted("
             "m for m in sys.modules if m.partition('.')[0] == 'megaplug_gtp')))")


def test_importing_the_package_imports_only_its_init():
    done = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True,
                          check=True)
    assert json.loads(done.stdout) == ["megaplug_gtp"]


def test_every_named_group_of_rules_names_rules():
    steps = [step for steps in plugin.megaplug_plugin.rules.steps.values() for step in steps]
    groups = [step for step in steps if step.group is not None]
    assert groups
    for group in groups:
        rules = group.rules()
        assert rules and all(callable(rule.function) and rule.name for rule in rules), group.group


def test_the_layout_resolver_is_reachable_from_the_package():
    from megaplug_gtp.layout import resolve_tensor_parallel_weight_shards

    assert plugin.resolve_tensor_parallel_weight_shards is resolve_tensor_parallel_weight_shards
