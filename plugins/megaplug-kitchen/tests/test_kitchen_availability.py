"""The kitchen plugin with and without the kitchen package."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import megaplug
import megaplug_kitchen
from megaplug import TargetEnvironment
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
UNAVAILABLE = ("belongs to plugin 'kitchen', which is unavailable: requires kitchen, "
               "not installed")


@pytest.fixture
def no_kitchen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure no kitchen module is imported or findable from an earlier test."""
    monkeypatch.delitem(sys.modules, "kitchen", raising=False)


@pytest.fixture
def fake_kitchen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tiny importable kitchen package on sys.path (not imported)."""
    package = tmp_path / "kitchen"
    package.mkdir()
    (package / "__init__.py").write_text('"""A stand-in for the kitchen package."""\n'
                                         '__version__ = "0.0.1"\n')
    monkeypatch.delitem(sys.modules, "kitchen", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    return package


def fresh_kernel(*, block: tuple[str, ...] = (), entry_point: bool = False,
                 local: TargetEnvironment | None = None) -> Kernel:
    """A new kernel (megaplug.load caches kernels per selection, so tests build their own)."""
    if entry_point:
        selection = PluginSelection(autoload=False, load=["kitchen"], block=set(block))
        plugins = PluginSet(selection, builtins=(), local=local)
    else:
        selection = PluginSelection(autoload=False, block=set(block))
        plugins = PluginSet(selection, builtins=(), extra=[megaplug_kitchen], local=local)
    return Kernel(plugins)


def problem_messages(kernel: Kernel, argv: list[str]) -> list[str]:
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve(argv, environ={})
    return [p.message for p in info.value.problems]


def test_without_kitchen_the_plugin_is_unavailable(no_kitchen):
    kernel = fresh_kernel()
    record = kernel.plugins.records["kitchen"]
    assert record.status == "unavailable"
    assert record.reason == "requires kitchen, not installed"
    assert "kitchen_recipe_number" not in kernel.table


def test_without_kitchen_its_flags_say_what_is_missing(no_kitchen):
    messages = problem_messages(fresh_kernel(), ["--kitchen-recipe-number", "3"])
    assert messages == [f"--kitchen-recipe-number {UNAVAILABLE}"]
    messages = problem_messages(fresh_kernel(), ["--kitchen-config-file", "q.yaml"])
    assert messages == [f"--kitchen-config-file {UNAVAILABLE}"]


def test_a_stated_target_without_kitchen_is_unavailable_too(fake_kitchen):
    kernel = fresh_kernel(local=TargetEnvironment(packages={"kitchen": None}))
    assert kernel.plugins.records["kitchen"].status == "unavailable"


def test_with_kitchen_the_flags_exist(fake_kitchen):
    kernel = fresh_kernel()
    assert kernel.plugins.records["kitchen"].status == "active"
    assert kernel.resolve([], environ={}).kitchen_recipe_number is None
    resolved = kernel.resolve(["--kitchen-recipe-number", "3"], environ={})
    assert resolved.kitchen_recipe_number == 3 and resolved.kitchen_config_file is None
    resolved = kernel.resolve(["--kitchen-config-file", "recipes/q.yaml"], environ={})
    assert resolved.kitchen_config_file == "recipes/q.yaml"


def test_kitchen_is_not_imported_by_the_plugin(fake_kitchen):
    fresh_kernel().resolve(["--kitchen-recipe-number", "1"], environ={})
    assert "kitchen" not in sys.modules


def test_config_file_and_recipe_number_are_exclusive(fake_kitchen):
    messages = problem_messages(fresh_kernel(), ["--kitchen-config-file", "q.yaml",
                                                 "--kitchen-recipe-number", "3"])
    assert messages == ["--kitchen-config-file and --kitchen-recipe-number cannot be used "
                        "together"]


def test_recipe_number_must_be_an_integer(fake_kitchen):
    messages = problem_messages(fresh_kernel(), ["--kitchen-recipe-number", "three"])
    assert len(messages) == 1
    assert messages[0].startswith("--kitchen-recipe-number: invalid int value 'three'")


def test_entry_point_loads_with_kitchen(fake_kitchen):
    kernel = fresh_kernel(entry_point=True)
    record = kernel.plugins.records["kitchen"]
    assert record.status == "active" and record.distribution == "megaplug-kitchen"
    assert kernel.resolve(["--kitchen-recipe-number", "2"], environ={}).kitchen_recipe_number == 2


def test_entry_point_without_kitchen_is_unavailable(no_kitchen):
    kernel = fresh_kernel(entry_point=True)
    assert kernel.plugins.records["kitchen"].status == "unavailable"
    assert problem_messages(kernel, ["--kitchen-recipe-number", "2"]) == [
        f"--kitchen-recipe-number {UNAVAILABLE}"]


def test_blocked_plugin_flags_name_the_plugin(fake_kitchen):
    for entry_point in (False, True):
        kernel = fresh_kernel(block=("kitchen",), entry_point=entry_point)
        assert kernel.plugins.records["kitchen"].status == "blocked"
        messages = problem_messages(kernel, ["--kitchen-recipe-number", "2"])
        assert messages == ["--kitchen-recipe-number belongs to plugin 'kitchen', which is "
                            "blocked: blocked by -p no: / MEGAPLUG_DISABLE"]
