"""Importing the package imports none of its other modules: `megaplug list` needs only
``__init__``; the options module is imported when the flags are declared."""

from __future__ import annotations

from megaplug.testing import modules_imported_by


def test_importing_the_package_imports_only_its_init():
    assert modules_imported_by("megaplug_kitchen") == ["megaplug_kitchen"]
