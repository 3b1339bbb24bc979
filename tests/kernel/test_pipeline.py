"""Sources, precedence, provenance, phases and the resolved object."""

from __future__ import annotations

import argparse
import json

import pytest

import megaplug
from toy_plugins import Core, CoreOptions, Feature, InPlaceMutator, Mutator, raising_plugin

from megaplug import ConfigError
from megaplug._config import ReadOnlyError


def test_precedence_default_caller_file_env_cli(make_kernel, tmp_path):
    kernel = make_kernel(Core())
    config = tmp_path / "c.yaml"
    config.write_text("lr: 0.25\nnum_layers: 5\nhidden-size: 16\n")
    resolved = kernel.resolve(["--num-layers", "7"], config_files=[str(config)],
                              defaults={"hidden_size": 4, "sizes": [1]}, environ={"RANK": "0"})
    assert resolved.lr == 0.25 and resolved.source("lr").source == "config-file"
    assert resolved.num_layers == 7 and resolved.source("num_layers").detail == "--num-layers"
    assert resolved.source("num_layers").previous.source == "config-file"
    # caller defaults fill only what is still None (Megatron's args_defaults rule)
    assert resolved.hidden_size == 16 and resolved.sizes == [1]
    assert resolved.source("sizes").source == "caller-default"
    assert any("keeping hidden_size=16 over the caller's default 4" in str(w)
               for w in resolved.warnings)
    assert resolved.source("rank").describe() == "environment variable RANK"
    assert resolved.source("mode").describe() == "declared default of core"


def test_json_config_and_a_later_file_wins(make_kernel, tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.yaml"
    first.write_text(json.dumps({"lr": 0.1, "sizes": [1, 2]}))
    second.write_text("lr: '0.3'\n")
    resolved = make_kernel(Core()).resolve([], config_files=[str(first), str(second)], environ={})
    assert resolved.lr == 0.3 and resolved.sizes == [1, 2]
    assert resolved.source("lr").detail == str(second)


def test_unsafe_yaml_is_refused(make_kernel, tmp_path):
    evil = tmp_path / "evil.yaml"
    evil.write_text("lr: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="YAML tag megaplug will not construct"):
        make_kernel(Core()).resolve([], config_files=[str(evil)], environ={})


def test_config_file_problems_are_reported(make_kernel, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hiden_size: 3\nnum_layers: many\nffn_hidden_size: 3\n")
    with pytest.raises(ConfigError) as info:
        make_kernel(Core()).resolve([], config_files=[str(bad), str(tmp_path / "missing.yaml")],
                                    environ={})
    text = str(info.value)
    assert "unrecognized argument hiden_size" in text and "did you mean --hidden-size" in text
    assert "--num-layers in config file" in text and "invalid int value 'many'" in text
    assert "'ffn_hidden_size' in config file" in text and "computed by plugin 'core'" in text
    assert "cannot read config file" in text


def test_derived_values_and_provenance(make_kernel):
    resolved = make_kernel(Core()).resolve(["--hidden-size", "8"], environ={"WORLD_SIZE": "4"})
    assert resolved.ffn_hidden_size == 32
    assert resolved.source("ffn_hidden_size").describe() == "derived by core from hidden_size"
    assert [p.source for p in resolved.source("ffn_hidden_size").history()] == [
        "derived", "default"]


def test_all_problems_from_all_plugins_are_reported_together(make_kernel):
    kernel = make_kernel(Core(), Feature())
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--num-layers", "0", "--experts", "3"],
                       environ={"WORLD_SIZE": "2", "RANK": "5"})
    plugins = sorted(p.plugin for p in info.value.problems)
    assert plugins == ["core", "core", "feature"]
    feature = next(p for p in info.value.problems if p.plugin == "feature")
    assert feature.flags == ("--experts",) and feature.hint


def test_malformed_environment_is_a_problem(make_kernel):
    with pytest.raises(ConfigError, match="environment variable WORLD_SIZE='two' is not valid"):
        make_kernel(Core()).resolve([], environ={"WORLD_SIZE": "two"})


def test_validate_may_not_mutate(make_kernel):
    with pytest.raises(ConfigError) as info:
        make_kernel(Core(), Mutator()).resolve([], environ={})
    assert "plugin 'mutator' tried to change 'lr' during validate" in str(info.value)


def test_validate_may_not_mutate_in_place(make_kernel):
    with pytest.raises(ConfigError) as info:
        make_kernel(Core(), InPlaceMutator()).resolve(["--sizes", "1"], environ={})
    assert "plugin 'inplace' changed sizes in validate" in str(info.value)


@pytest.mark.parametrize("hook", ["add_args", "normalize", "derive", "validate"])
def test_a_plugin_raising_in_a_hook_is_named(make_kernel, hook):
    with pytest.raises(ConfigError) as info:
        make_kernel(Core(), raising_plugin(hook)).resolve([], environ={})
    text = str(info.value)
    assert f"raises_in_{hook}" in text and f"RuntimeError in {hook}: boom in {hook}" in text


def test_resolved_is_read_only_and_converts(make_kernel):
    resolved = make_kernel(Core()).resolve(["--hidden-size", "8"], environ={})
    with pytest.raises(ReadOnlyError):
        resolved.lr = 1.0
    namespace = resolved.to_namespace()
    assert isinstance(namespace, argparse.Namespace) and namespace.hidden_size == 8
    assert resolved.to_dict()["ffn_hidden_size"] == 32
    options = resolved.options("core")
    assert isinstance(options, CoreOptions) and options.hidden_size == 8
    assert resolved.options(CoreOptions).ffn_hidden_size == 32


# -- a rule never blamed for raising on a value its owner refused ------------------------------

def _owner_and_reader():
    import types

    from megaplug import PluginInfo, Problem, Rules
    from megaplug.testing import stand_in

    def check_shape(config):
        if config.shape.startswith("["):
            return [Problem(f"--shape is malformed: {config.shape}", flags=("shape",),
                            hint="write it as N")]
        return []

    def read_shape(config):
        return [] if int(config.shape) >= 0 else []  # raises on what check_shape refused

    owner = stand_in("owner", ("--shape", {"default": "1"}), rules=Rules(validate=(check_shape,)))
    reader = types.ModuleType("reader_plugin")
    reader.megaplug_plugin = PluginInfo(name="reader", after=("owner",),
                                        rules=Rules(validate=(read_shape,)))
    return megaplug.load(builtins=[owner, reader],
                         environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})[0]


def _problems(kernel, *argv):
    with pytest.raises(megaplug.ConfigError) as error:
        kernel.resolve(list(argv), environ={}, target=megaplug.TargetEnvironment())
    return [(p.plugin, p.message) for p in error.value.problems]


def test_a_rule_raising_on_a_value_its_owner_refused_is_not_reported():
    kernel = _owner_and_reader()
    assert _problems(kernel, "--shape", "[1]*99") == [("owner", "--shape is malformed: [1]*99")]


def test_a_rule_raising_on_a_value_nobody_refused_is_still_a_bug_of_that_rule():
    kernel = _owner_and_reader()
    found = _problems(kernel, "--shape", "x")
    assert [plugin for plugin, _ in found] == ["reader"]
    assert "raised ValueError in validate rule read_shape" in found[0][1]


def test_a_valid_resolve_reads_values_without_a_log():
    kernel = _owner_and_reader()
    assert kernel.resolve(["--shape", "3"], environ={}).shape == "3"
