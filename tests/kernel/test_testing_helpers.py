"""``megaplug.testing``'s helpers for plugin authors, checked on plugins built here."""

from __future__ import annotations

import pytest

import megaplug
from megaplug import PluginInfo, Rules
from megaplug.testing import (MINIMAL_ARGV, check_plugin, minimal_argv, modules_imported_by,
                              named_rules, problems, resolve)

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


# -- resolve / problems / minimal_argv, the functions behind the fixtures --------


def test_minimal_argv_is_valid_with_every_installed_plugin():
    config = resolve()
    assert (config.num_layers, config.hidden_size, config.micro_batch_size) == (2, 64, 1)
    assert minimal_argv("--hidden-size", "128") == [*MINIMAL_ARGV, "--hidden-size", "128"]
    assert resolve("--hidden-size", "128").hidden_size == 128


def test_the_callers_environment_does_not_leak_in(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")  # RANK 3 is not below WORLD_SIZE 2: invalid
    monkeypatch.setenv("MEGAPLUG_DISABLE", "model")
    assert problems() == []
    assert resolve().data_parallel_size == 1
    assert resolve(environ={"WORLD_SIZE": "4", "RANK": "0"}).data_parallel_size == 4


def test_problems_lists_every_problem_and_resolve_raises():
    found = problems("--micro-batch-size", "0", "--hidden-size", "60",
                     "--num-attention-heads", "7")
    assert sorted(p.plugin for p in found) == ["model", "training"]
    with pytest.raises(megaplug.ConfigError):
        resolve("--micro-batch-size", "0")


def test_a_plugin_module_can_be_passed_directly():
    import types

    plugin = types.ModuleType("direct_plugin")
    plugin.megaplug_plugin = megaplug.PluginInfo(name="direct")

    @megaplug.hookimpl
    def add_args(flags):
        flags.add_argument("--direct-flag", type=int, default=3)

    plugin.add_args = add_args
    assert resolve("--direct-flag", "5", plugins=[plugin]).direct_flag == 5


def test_the_resolve_fixture_resolves_under_the_release_its_target_names(resolve):
    # --muon-tp-mode is new in 0.16: 0.15's table has no such setting, 0.16's has
    assert "muon_tp_mode" not in resolve(packages={"megatron_core": "0.15.0"})
    assert resolve(packages={"megatron_core": "0.16.1"}).muon_tp_mode == "blockwise"
    with pytest.raises(megaplug.ConfigError, match="unrecognized argument --muon-tp-mode"):
        resolve("--muon-tp-mode", "duplicated", packages={"megatron_core": "0.15.0"})


def test_a_kernel_refuses_a_target_of_another_release():
    kernel, _ = megaplug.load(environ={}, target=megaplug.TargetEnvironment(
        packages={"megatron_core": "0.19.2"}))
    other = megaplug.TargetEnvironment(packages={"megatron_core": "0.15.0"}, environ={})
    with pytest.raises(megaplug.ConfigError) as error:
        kernel.resolve(MINIMAL_ARGV, target=other)
    assert [(p.message, p.hint) for p in error.value.problems] == [(
        "this kernel's flag table is for megatron_core 0.19.2, but the target runs "
        "megatron_core 0.15.0", "resolve with the kernel of the target's release: "
        "megaplug.load(target=TARGET) or megaplug.resolve(argv, target=TARGET)")]
