"""``megaplug.testing``'s helpers for plugin authors, checked on plugins built here."""

from __future__ import annotations

import pytest

from megaplug import PluginInfo, Rules
from megaplug.testing import modules_imported_by, named_rules

EAGER_INIT = "from . import checks\n"
LAZY_INIT = ""
CHECKS = "def depth_is_even(config):\n    pass\n\n\nCHECKS = (depth_is_even,)\n"


@pytest.fixture
def package(tmp_path, monkeypatch):
    def make(init: str) -> str:
        name = f"plugin_{len(list(tmp_path.iterdir()))}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(init)
        (tmp_path / name / "checks.py").write_text(CHECKS)
        return name

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return make


def test_modules_imported_by_names_what_importing_a_package_loads(package):
    lazy, eager = package(LAZY_INIT), package(EAGER_INIT)
    assert modules_imported_by(lazy) == [lazy]
    assert modules_imported_by(eager) == [eager, f"{eager}.checks"]


def test_named_rules_imports_each_group_and_names_its_rules(package):
    name = package(LAZY_INIT)

    class Plugin:
        megaplug_plugin = PluginInfo(name="p", rules=Rules(validate=(f"{name}.checks:CHECKS",)))

    assert named_rules(Plugin) == {f"{name}.checks:CHECKS": ["depth_is_even"]}

    class Misspelt:
        megaplug_plugin = PluginInfo(name="q", rules=Rules(validate=(f"{name}.checks:CHEKS",)))

    with pytest.raises(AttributeError):
        named_rules(Misspelt)
