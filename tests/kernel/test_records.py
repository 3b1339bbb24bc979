"""The kernel's records: value equality, immutability where promised, readable reprs."""

from __future__ import annotations

import pytest

from megaplug import PluginInfo, Problem, Requirement, TargetEnvironment
from megaplug._config import Provenance
from megaplug._errors import ProblemSink
from megaplug._options import FlagSpec


def test_public_records_compare_and_hash_by_value():
    assert Problem("bad", ["--x"], "fix it", "model") == Problem("bad", ("--x",), "fix it", "model")
    assert Problem("bad") != Problem("bad", plugin="model")
    assert len({Requirement("kitchen", "1.0"), Requirement("kitchen", "1.0")}) == 1
    assert PluginInfo("lora", after="model") == PluginInfo("lora", after=("model",))


def test_frozen_records_refuse_changes():
    problem = Problem("bad")
    with pytest.raises(AttributeError, match="Problem is immutable; cannot set 'message'"):
        problem.message = "good"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="PluginInfo is immutable"):
        del PluginInfo("lora").name  # type: ignore[misc]


def test_plugin_info_takes_one_name_or_several_and_requirement_strings():
    info = PluginInfo("lora", after="model", before=["moe", "mla"], requires="peft")
    assert info.after == ("model",) and info.before == ("moe", "mla")
    assert info.requires == (Requirement("peft"),)
    assert repr(info) == ("PluginInfo(name='lora', description='', version=None, after=('model',), "
                          "before=('moe', 'mla'), requires=(Requirement(import_name='peft', "
                          "min_version=None),))")


def test_hidden_fields_take_no_part_in_equality_or_repr():
    given = Provenance("command-line", "--lr", "training", value="0.1")
    assert given == Provenance("command-line", "--lr", "training", value=0.1)
    assert "value" not in repr(given)
    target = TargetEnvironment(packages={"transformer_engine": "2.17.1"})
    target.package_version("surely_not_installed_megaplug_probe")
    assert target == TargetEnvironment(packages={"transformer_engine": "2.17.1"})


def test_mutable_records_change_and_are_unhashable():
    spec = FlagSpec("lr", "training", option_strings=("--lr",), type=float)
    spec.deprecated_spellings = ("--learning-rate",)
    assert spec.deprecated_spellings == ("--learning-rate",)
    with pytest.raises(TypeError, match="unhashable"):
        hash(spec)
    sink = ProblemSink()
    sink.error("bad", flags=["--x"], hint="fix", plugin="model")
    sink.add(Problem("returned"), "model", "check_x")  # a rule's own problem, stamped
    assert sink.problems == [Problem("bad", ("--x",), "fix", "model"),
                             Problem("returned", plugin="model", rule="check_x")]


def test_a_target_with_another_environment_keeps_packages_and_forgets_lookups():
    target = TargetEnvironment(packages={"te": "1"}, device_capability=(9, 0))
    target.package_version("surely_not_installed_megaplug_probe")
    moved = target.with_environ({"RANK": "3"})
    assert moved.packages == {"te": "1"} and moved.device_capability == (9, 0)
    assert moved.getenv("RANK") == "3" and moved._looked_up == {}
