"""Rules as data: a plugin declares its rules, the kernel runs them and blames each by name."""

from __future__ import annotations

import pytest
from toy_plugins import Core

from megaplug import ConfigError, PluginInfo, Problem, Rules, hookimpl

rules = Rules()


@rules.normalize
def double_lr(config):
    config.set("lr", config.lr * 2, inputs=("lr",), reason="doubled")


@rules.derive
def ffn_from_layers(config):
    config.set("ffn_hidden_size", config.num_layers * 10, inputs=("num_layers",))


@rules.validate
def layers_below_ten(config):
    if config.num_layers >= 10:
        config.error(f"--num-layers {config.num_layers} is too deep", flags=("num_layers",),
                     hint="use fewer layers")


@rules.validate
def returns_problems(config):
    if config.verbose:
        return [Problem("verbose is noisy", ("verbose",), "drop --verbose")]
    return None


def raises_when_mode_b(config):
    if config.mode == "b":
        raise RuntimeError("mode b is not handled")


def appends_to_sizes(config):
    if config.sizes is not None:
        config.sizes.append(7)


def five_layers(config):
    return config.num_layers == 5


def warns(config):
    config.warn("conditional rule ran")


rules.validate(raises_when_mode_b, appends_to_sizes)
rules.validate(warns, when=five_layers)


class Ruled:
    """Runs after the core; its hooks are rules, plus an ordinary pluggy hook."""

    megaplug_plugin = PluginInfo(name="ruled", after=("core",), rules=rules)

    @hookimpl
    def derive(self, config):
        config.set("data_parallel_size", 3)


@pytest.fixture
def kernel(make_kernel):
    return make_kernel(Core(), Ruled())


def test_rules_run_in_their_phase_and_provenance_names_the_rule(kernel):
    resolved = kernel.resolve(["--num-layers", "3", "--lr", "0.5"], environ={})
    assert resolved.lr == 1.0 and resolved.ffn_hidden_size == 30
    assert resolved.source("lr").rule == "double_lr"
    assert resolved.source("lr").describe() == "normalized by ruled from lr (doubled)"
    assert resolved.source("ffn_hidden_size").rule == "ffn_from_layers"
    assert resolved.source("ffn_hidden_size").to_dict()["rule"] == "ffn_from_layers"


def test_a_plugin_hook_runs_before_its_rules_of_the_same_phase(kernel):
    resolved = kernel.resolve([], environ={})
    assert resolved.data_parallel_size == 3
    assert resolved.source("data_parallel_size").rule is None
    assert kernel.plugins.records["ruled"].hooks == ("normalize", "derive", "validate")


def test_problems_name_the_rule_that_reported_them(kernel):
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "12", "--verbose"], environ={})
    found = {p.message: (p.plugin, p.rule) for p in info.value.problems}
    assert found == {"--num-layers 12 is too deep": ("ruled", "layers_below_ten"),
                     "verbose is noisy": ("ruled", "returns_problems")}


def test_a_rule_that_raises_is_reported_and_the_others_still_run(kernel):
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--mode", "b", "--num-layers", "12"], environ={})
    by_rule = {p.rule: p.message for p in info.value.problems}
    assert "raised RuntimeError in validate rule raises_when_mode_b" in by_rule[
        "raises_when_mode_b"]
    assert by_rule["layers_below_ten"] == "--num-layers 12 is too deep"


def test_a_validate_rule_that_mutates_is_blamed_and_undone(kernel):
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--sizes", "1", "2"], environ={})
    [problem] = info.value.problems
    assert problem.rule == "appends_to_sizes"
    assert problem.message == "plugin 'ruled' changed sizes in validate"


def test_a_rule_group_runs_only_when_its_condition_holds(kernel):
    assert kernel.resolve([], environ={}).warnings == ()
    [warning] = kernel.resolve(["--num-layers", "5"], environ={}).warnings
    assert (warning.message, warning.plugin, warning.rule) == (
        "conditional rule ran", "ruled", "warns")


def test_rules_as_a_table_and_their_repr():
    table = Rules(normalize=(double_lr,), validate=(layers_below_ten, returns_problems))
    assert repr(table) == "Rules(normalize=(double_lr), validate=(layers_below_ten, " \
                          "returns_problems))"
    with pytest.raises(TypeError, match="must be callable"):
        Rules(derive=("not a function",))
    with pytest.raises(TypeError, match="must be callable, got 42"):
        Rules(derive=(42,))
    with pytest.raises(TypeError, match="must be callable"):
        Rules().validate(double_lr, when="not a condition")


class Feature:
    """Takes over the ruled plugin's depth check while --verbose is on."""

    feature_rules = Rules()
    megaplug_plugin = PluginInfo(name="feature", after=("ruled",), rules=feature_rules)
    feature_rules.supersede("ruled.layers_below_ten", when=lambda config: config.verbose)


def test_a_feature_supersedes_another_plugins_rule_while_it_is_in_use(make_kernel):
    kernel = make_kernel(Core(), Ruled(), Feature())
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "12"], environ={})
    assert [p.rule for p in info.value.problems] == ["layers_below_ten"]
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "12", "--verbose"], environ={})
    assert [p.rule for p in info.value.problems] == ["returns_problems"]


# -- a group of rules named by reference: imported only where its condition holds ----------

NAMED_RULES = '''
import os

with open(os.environ["NAMED_RULES_LOG"], "a") as log:
    log.write("imported\\n")


def depth_is_odd(config):
    if config.num_layers % 2:
        config.error(f"--num-layers {config.num_layers} is odd", flags=("num_layers",))


def mode_is_known(config):
    if config.mode == "b":
        raise RuntimeError("mode b is not handled")


RULES = (depth_is_odd, mode_is_known)
'''


def verbose(config):
    return config.verbose


def unreadable_condition(config):
    raise KeyError("no such setting")


def _named(module: str, when) -> object:
    named = Rules()
    named.validate(f"{module}:RULES", when=when)

    class Named:
        megaplug_plugin = PluginInfo(name="named", after=("core",), rules=named)

    return Named()


@pytest.fixture
def named_module(tmp_path, monkeypatch):
    name = f"named_rules_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(NAMED_RULES)
    log = tmp_path / "imports.log"
    monkeypatch.setenv("NAMED_RULES_LOG", str(log))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, log


def test_a_named_group_runs_only_when_its_condition_holds(make_kernel, named_module):
    # a kernel declared here (not read from the cache) checks every reference as it loads;
    # a process reading the stored table imports the group only when its condition holds
    # (tests/builtin/test_lazy_rules.py)
    name, log = named_module
    kernel = make_kernel(Core(), _named(name, verbose))
    assert kernel.resolve(["--num-layers", "3"], environ={}).num_layers == 3
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "3", "--verbose", "--mode", "b"], environ={})
    found = {p.rule: p.message for p in info.value.problems}
    assert found["depth_is_odd"] == "--num-layers 3 is odd"  # each rule blamed by its name
    assert "raised RuntimeError in validate rule mode_is_known" in found["mode_is_known"]
    kernel.resolve(["--num-layers", "4", "--verbose"], environ={})
    assert log.read_text() == "imported\n"  # once per process


def test_a_named_group_whose_condition_raises_reports_it_for_each_rule(make_kernel,
                                                                       named_module):
    name, _log = named_module
    kernel = make_kernel(Core(), _named(name, unreadable_condition))
    with pytest.raises(ConfigError) as info:
        kernel.resolve([], environ={})
    assert sorted(p.rule for p in info.value.problems) == ["depth_is_odd", "mode_is_known"]
    assert all("raised KeyError" in p.message for p in info.value.problems)


def test_a_named_group_that_cannot_be_imported_is_a_problem_of_its_plugin(make_kernel):
    # checked when the plugin set loads, not only in a resolve whose condition holds
    kernel = make_kernel(Core(), _named("no_such_module_of_rules", verbose))
    for argv in ([], ["--verbose"]):
        with pytest.raises(ConfigError) as info:
            kernel.resolve(argv, environ={})
        [problem] = info.value.problems
        assert problem.plugin == "named"
        assert problem.message.startswith("plugin 'named': the rules no_such_module_of_rules:"
                                          "RULES names nothing that can be imported")


def test_a_named_group_without_a_condition_runs_in_every_resolve(make_kernel, named_module):
    name, log = named_module
    kernel = make_kernel(Core(), _named(name, None))
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "3"], environ={})
    assert [p.rule for p in info.value.problems] == ["depth_is_odd"]
    assert kernel.resolve(["--num-layers", "4"], environ={}).num_layers == 4
    assert log.read_text() == "imported\n"  # once per process


def test_a_rule_named_by_text_must_name_a_module_list():
    with pytest.raises(TypeError, match="'module:NAME'"):
        Rules(validate=("check_depth",))
