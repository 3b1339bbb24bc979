"""The flag table as a value (``_registry.declare``): one builder, a new table per call,
nothing shared between tables, a failing plugin failing alone, and the kernel as the one
writer of its own state (the cache hands back a value)."""

from __future__ import annotations

import pytest

from megaplug._options import FlagSpec
from megaplug._registry import Declaration, Declared, FlagTable, declare


def _flags(*options: str):
    """A declaring function adding ``options`` (each its own int setting)."""
    def add(flags):
        for option in options:
            flags.add_argument(option, type=int)
    return add


def test_declare_builds_the_table_of_every_active_plugin_in_order():
    declared = declare([Declaration("a", None, (_flags("--alpha"),)),
                        Declaration("b", None, (_flags("--beta", "--gamma"),))], {})
    assert isinstance(declared, Declared) and declared.failures == {}
    assert [(spec.plugin, spec.dest) for spec in declared.table] == [
        ("a", "alpha"), ("b", "beta"), ("b", "gamma")]
    assert declared.table.by_option["--beta"].plugin == "b"
    assert declared.inactive == {}


def test_each_call_builds_a_new_table_sharing_nothing_with_another():
    declarations = [Declaration("a", None, (_flags("--alpha"),))]
    first, second = declare(declarations, {}), declare(declarations, {})
    assert first.table is not second.table
    for index in ("specs", "by_dest", "by_option", "by_env", "options_classes",
                  "mutex_groups", "release_data", "withheld", "elsewhere", "renamed"):
        assert getattr(first.table, index) is not getattr(second.table, index), index


def test_a_failing_plugin_fails_alone_and_its_spellings_are_learned():
    def raising(flags):
        flags.add_argument("--delta", type=int)
        raise RuntimeError("boom")

    declared = declare([Declaration("a", None, (_flags("--alpha"),)),
                        Declaration("clash", None, (_flags("--alpha", "--epsilon"),)),
                        Declaration("bad", None, (raising,))], {})
    assert set(declared.failures) == {"clash", "bad"}
    assert "both declare the setting 'alpha'" in str(declared.failures["clash"])
    assert isinstance(declared.failures["bad"], RuntimeError)
    assert declared.table.by_option["--alpha"].plugin == "a"
    assert "--delta" in declared.table.by_option  # declared before it raised (as before)
    assert [spec.dest for spec in declared.inactive["clash"]] == ["alpha", "epsilon"]
    assert "bad" not in declared.inactive  # learning it raised again


def test_an_inactive_plugins_flags_are_learned_not_declared():
    declared = declare([Declaration("a", None, (_flags("--alpha"),)),
                        Declaration("off", None, (_flags("--zeta"),), active=False),
                        Declaration("empty", None, (), active=False)], {})
    assert "--zeta" not in declared.table.by_option
    assert [spec.dest for spec in declared.inactive["off"]] == ["zeta"]
    assert "empty" not in declared.inactive  # it declares nothing


def _kitchen(status: str):
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection

    kernel = Kernel(PluginSet(PluginSelection.from_environment({})),
                    lines={"megatron_core": "0.15.3"})
    if kernel.plugins.records["kitchen"].status != status:
        pytest.skip(f"kitchen is not {status} here")
    return kernel


def test_an_unavailable_plugins_release_flags_reach_the_table_through_its_declaration():
    """Megatron 0.13-0.15 declare kitchen's flags with or without the kitchen package: the
    unavailable plugin's release data is narrowed into the table because its declaration
    says so (``releases``), not through a dictionary another table shares."""
    kernel = _kitchen("unavailable")
    assert kernel.table.by_option["--kitchen-config-file"].plugin == "kitchen"
    assert "kitchen" in kernel.table.release_data
    assert [spec.dest for spec in kernel.inactive_specs["kitchen"]] == [
        "kitchen_config_file", "kitchen_recipe_number"]
    kitchen = Declaration("kitchen", "megaplug_kitchen.options:declare", (), active=False)
    alone = declare([kitchen], {"megatron_core": "0.15.3"})  # (releases not asked for)
    assert "--kitchen-config-file" not in alone.table.by_option
    assert alone.table.release_data == {}


def test_narrowing_leaves_the_declared_table_and_its_dictionaries_alone():
    from megaplug.environment import ReleaseData
    from megaplug.environment._narrow import narrow

    data = {"package": "megatron_core", "releases": ["0.13.0", "seed"],
            "flags": {"--alpha": {"default": [["0.13.0", "0.13.0", 7]]}}}
    table = FlagTable.assemble([FlagSpec("alpha", "a", option_strings=("--alpha",), type=int)],
                               release_data={"a": ReleaseData(data)})
    narrowed = narrow(table, {"megatron_core": "0.13.0"})
    assert narrowed.by_option["--alpha"].default == 7
    assert table.by_option["--alpha"].default is None
    assert narrowed.options_classes is not table.options_classes
    assert narrowed.release_data is not table.release_data


def test_the_cache_hands_back_a_value_and_the_kernel_takes_it(tmp_path, monkeypatch):
    from megaplug._plugins import PluginSet
    from megaplug.cache._flag_table import declare_or_read
    from megaplug.sources._selection import PluginSelection

    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    records = PluginSet(PluginSelection.from_environment({})).records.values()
    built = []

    def build() -> Declared:
        built.append(declare([Declaration("a", None, (_flags("--alpha"),))], {}))
        return built[-1]

    first, sources = declare_or_read(records, {}, build, lambda declared: True)
    assert first is built[0] and sources is None  # declared here, and stored
    again, sources = declare_or_read(records, {}, build, lambda declared: True)
    assert len(built) == 1 and isinstance(sources, dict)  # read back
    assert [spec.dest for spec in again.table] == ["alpha"] and again.failures == {}
    refused, sources = declare_or_read(records, {"megatron_core": "x"}, build,
                                       lambda declared: False)
    assert refused is built[1] and sources is None
    _, sources = declare_or_read(records, {"megatron_core": "x"}, build, lambda declared: False)
    assert len(built) == 3 and sources is None  # not stored: declared again
