"""Every name a plugin gives is checked when its plugin set loads: a group of rules
(``"module:NAME"``), its options, a superseded rule, an ``after`` / ``before`` plugin. A
misspelt one is a problem naming the plugin and the nearest name; nothing is found only
when (if ever) the phase runs."""

from __future__ import annotations

import types

import pytest

import megaplug
from megaplug import PluginInfo, Rules
from megaplug.testing import stand_in


def _module(name: str, **info: object) -> types.ModuleType:
    module = types.ModuleType(f"plugin_{name}")
    module.megaplug_plugin = PluginInfo(name=name, **info)  # type: ignore[attr-defined]
    return module


def declare_width(flags):
    flags.add_argument("--width", type=int, default=1)


def check_width(config):
    if config.width > 8:
        config.error("--width must be at most 8")


#: The rules a group may name: this module's RULES.
RULES = [check_width]
TARGET = _module("target", options=declare_width, rules=Rules(validate=(check_width,)))


def _setup_problems(*plugins: object) -> list[str]:
    kernel, _ = megaplug.load(builtins=[TARGET, *plugins],
                              environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    kernel.check_references()
    return [f"[{p.plugin}] {p.message}" for p in kernel.setup_problems]


def test_well_named_references_are_accepted_and_run():
    rules = Rules(validate=(f"{__name__}:RULES",))
    rules.supersede("target.check_width", when=lambda config: True)
    assert _setup_problems(_module("good", rules=rules, before=("target",))) == []


def test_a_misspelt_group_names_the_plugin_and_the_nearest_name():
    found = _setup_problems(_module("typo", rules=Rules(validate=(f"{__name__}:RULE",))))
    assert found == [f"[typo] plugin 'typo': the rules {__name__}:RULE names nothing that can "
                     f"be imported (AttributeError: module '{__name__}' has no attribute 'RULE')"
                     f" (did you mean {__name__}:RULES?)"]


def test_a_group_in_a_missing_module_names_the_nearest_module():
    found = _setup_problems(_module("gone", rules=Rules(derive=("megaplug.builtin.modle.checks:"
                                                                "VALIDATE",))))
    assert len(found) == 1 and found[0].startswith("[gone] plugin 'gone': the rules ")
    assert found[0].endswith("(did you mean megaplug.builtin.model.checks:VALIDATE?)")


@pytest.mark.parametrize("target, message", [
    ("target.check_widht", "plugin 'sup' supersedes 'target.check_widht', but plugin 'target' "
                           "has no rule 'check_widht' (did you mean check_width?)"),
    ("targte.check_width", "plugin 'sup' supersedes 'targte.check_width', but no plugin is "
                           "named 'targte' (did you mean target?)"),
])
def test_a_misspelt_supersede_target_is_refused(target, message):
    rules = Rules()
    rules.supersede(target, when=lambda config: True)
    assert _setup_problems(_module("sup", rules=rules)) == [f"[sup] {message}"]


def test_a_misspelt_before_is_refused_and_an_absent_optional_one_is_not():
    assert _setup_problems(_module("early", before=("targte",))) == [
        "[early] plugin 'early' must run before 'targte', which is not installed "
        "(did you mean target?)"]
    assert _setup_problems(_module("early2", before=("some_optional_feature",))) == []


def test_a_misspelt_after_names_the_nearest_plugin():
    with pytest.raises(megaplug.PluginError, match=r"must run after 'targte', which is not "
                                                   r"installed \(did you mean target\?\)"):
        _setup_problems(_module("late", after=("targte",)))


def test_a_misspelt_options_reference_breaks_the_plugin_with_its_name():
    found = _setup_problems(_module("opts", options=f"{__name__}:declare_widht"))
    assert found == [f"[opts] plugin 'opts': options='{__name__}:declare_widht' names nothing "
                     f"that can be imported (AttributeError: module '{__name__}' has no "
                     f"attribute 'declare_widht') (did you mean {__name__}:declare_width?)"]


def test_a_misspelt_reference_fails_every_resolve_naming_the_plugin():
    plugin = _module("typo2", rules=Rules(validate=(f"{__name__}:RULE",)))
    kernel, _ = megaplug.load(builtins=[TARGET, plugin],
                              environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    for _ in range(2):
        with pytest.raises(megaplug.ConfigError) as caught:
            kernel.resolve([], environ={})
        assert [p.plugin for p in caught.value.problems] == ["typo2"]


def test_a_stand_ins_rules_are_not_held_to_a_supersede():
    # a test's stand-in declares only what the test needs
    rules = Rules()
    rules.supersede("target.check_widht", when=lambda config: True)
    kernel, _ = megaplug.load(builtins=[stand_in("target", ("--width", {"type": int})),
                                        _module("sup", rules=rules)],
                              environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    kernel.check_references()
    assert kernel.setup_problems == []
