"""pluggy validates every hook implementation; megaplug refuses pluggy's call-order options.

Each mistake makes the plugin *broken* with a reason naming the hook, and a resolve reports
it as a problem of that plugin (so it can be blocked with ``-p no:NAME``).
"""

from __future__ import annotations

import types

import pytest

from megaplug import ConfigError, PluginInfo, hookimpl
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
def _plugin(name: str, **hooks: object) -> types.ModuleType:
    """A plugin module named ``name`` with the given functions as attributes."""
    module = types.ModuleType(f"plugin_{name}")
    module.megaplug_plugin = PluginInfo(name=name)  # type: ignore[attr-defined]
    for attribute, function in hooks.items():
        setattr(module, attribute, function)
    return module


def _record(plugin: object):
    plugins = PluginSet(PluginSelection(autoload=False), builtins=[plugin])
    return plugins.records[plugin.megaplug_plugin.name]  # type: ignore[attr-defined]


@hookimpl
def validat(config):  # a misspelt ``validate``
    pass


@hookimpl
def derive_wrong_argument(flags):
    pass


@hookimpl
def add_args_with_config(config):
    pass


def test_a_misspelt_hook_name_breaks_the_plugin():
    record = _record(_plugin("typo", validat=validat))
    assert record.status == "broken"
    assert "unknown hook 'validat'" in record.reason
    assert "megaplug's hooks are add_args, normalize, derive, validate" in record.reason


def test_an_argument_the_hook_does_not_offer_breaks_the_plugin():
    record = _record(_plugin("signature", derive=derive_wrong_argument))
    assert record.status == "broken"
    assert "derive" in record.reason and "flags" in record.reason


def test_a_hook_written_for_another_phase_breaks_the_plugin():
    # ``config`` is what the phases receive; add_args receives ``flags``
    record = _record(_plugin("phase", add_args=add_args_with_config))
    assert record.status == "broken"
    assert "add_args" in record.reason and "config" in record.reason


@pytest.mark.parametrize("option", ["tryfirst", "trylast", "hookwrapper", "wrapper"])
def test_call_order_options_are_refused_clearly(option: str):
    @hookimpl(**{option: True})
    def derive(config):
        yield

    record = _record(_plugin("ordered", derive=derive))
    assert record.status == "broken"
    assert f"hook derive uses {option}=True" in record.reason
    assert "PluginInfo(after=..., before=...)" in record.reason


def test_a_broken_hook_is_a_problem_of_its_plugin_and_can_be_blocked():
    from megaplug._kernel import Kernel

    typo = _plugin("typo", validat=validat)
    with pytest.raises(ConfigError) as info:
        Kernel(PluginSet(PluginSelection(autoload=False), builtins=[typo])).resolve([])
    assert [p.plugin for p in info.value.problems] == ["typo"]
    assert "unknown hook 'validat'" in info.value.problems[0].message
    blocked = Kernel(PluginSet(PluginSelection(autoload=False, block={"typo"}), builtins=[typo]))
    assert blocked.resolve([]).plugins == ()


def test_a_valid_plugin_registers_after_a_broken_one():
    @hookimpl
    def validate(config):
        pass

    plugins = PluginSet(PluginSelection(autoload=False),
                        builtins=[_plugin("typo", validat=validat),
                                  _plugin("fine", validate=validate)])
    assert plugins.records["fine"].status == "active"
    assert plugins.records["fine"].hooks == ("validate",)
    assert [r.name for r in plugins.active()] == ["fine"]


def test_the_same_module_loaded_twice_stays_registered_once():
    @hookimpl
    def add_args(flags):
        flags.add_argument("--twice", type=int, default=2)

    from megaplug._kernel import Kernel

    module = _plugin("twice", add_args=add_args)
    plugins = PluginSet(PluginSelection(autoload=False), builtins=[module], extra=[module])
    assert plugins.manager.get_plugin("twice") is module
    assert Kernel(plugins).resolve(["--twice", "3"]).twice == 3
