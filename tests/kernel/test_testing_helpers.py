"""``megaplug.testing``'s helpers for plugin authors, checked on plugins built here."""

from __future__ import annotations

import pytest

from megaplug import PluginInfo, Rules
from megaplug.testing import check_plugin, modules_imported_by, named_rules

pytest_plugins = ["pytester"]

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


def _declared(name: str, group: str) -> str:
    return ("from megaplug import PluginInfo, Rules\n"
            f"megaplug_plugin = PluginInfo(name={name!r}, rules=Rules(validate=({group!r},)))\n")


def test_check_plugin_accepts_a_declaration_and_names_what_is_wrong(package):
    good = package("")
    good_init = _declared(good.replace("_", "x"), f"{good}.checks:CHECKS")
    bad = package("")
    import os
    import pathlib

    root = pathlib.Path(os.environ["PYTHONPATH"])
    (root / good / "__init__.py").write_text(good_init)
    (root / bad / "__init__.py").write_text("from . import checks\n" + _declared(
        bad.replace("_", "y"), f"{bad}.checks:CHEKS"))
    assert check_plugin(good) == []
    found = check_plugin(bad)
    assert found[0] == (f"importing {bad} imports {bad}.checks: keep {bad}/__init__.py free of "
                        "imports, naming the options and rules by reference ('module:NAME')")
    assert found[1].endswith(f"(did you mean {bad}.checks:CHECKS?) (hint: correct the name in "
                             f"plugin {bad.replace('_', 'y')!r}'s PluginInfo, or block it with "
                             f"-p no:{bad.replace('_', 'y')})")
    assert len(found) == 2


def test_the_pytest_plugin_resolves_with_a_chosen_plugin_set(pytester):
    pytester.makeconftest('''
import pytest
from megaplug.testing import stand_in


def check_width(config):
    if config.width > 8:
        config.error(f"--width {config.width} is over 8")


PLUGIN = stand_in("wide", ("--width", {"type": int, "default": 1}))
PLUGIN.megaplug_plugin.rules.validate(check_width)


@pytest.fixture
def megaplug_plugins():
    return [PLUGIN]
''')
    pytester.makepyfile('''
def test_width(resolve, problems, warnings):
    assert resolve("--width", "3").width == 3
    assert problems("--width", "9") == ["--width 9 is over 8"]
    assert warnings("--width", "9") == []
''')
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
