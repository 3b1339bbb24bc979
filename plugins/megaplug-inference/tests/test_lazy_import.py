"""Importing the package imports none of its other modules: `megaplug list` needs only
``__init__``; the rule modules are named by reference and imported once a resolve runs them."""

from __future__ import annotations

import megaplug_inference as plugin
from megaplug.testing import modules_imported_by, named_rules


def test_importing_the_package_imports_only_its_init():
    assert modules_imported_by("megaplug_inference") == ["megaplug_inference"]


def test_every_named_group_of_rules_names_rules():
    groups = named_rules(plugin)
    assert groups and all(groups.values()), groups
