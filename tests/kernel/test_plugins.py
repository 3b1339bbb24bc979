"""Discovery, control (-p, MEGAPLUG_*), availability, breakage and ordering."""

from __future__ import annotations

import random
import sys
import types

import pytest
from toy_plugins import Core, NeedsMissingPackage, Tracer

from megaplug import ConfigError, PluginError
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
def test_selection_from_argv_and_environment():
    selection = PluginSelection.from_environment(
        {"MEGAPLUG_PLUGINS": "a.b, c", "MEGAPLUG_DISABLE": "moe,rl",
         "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    rest = selection.take_from_argv(["--x", "1", "-p", "no:mla", "-pextra", "-p", "d",
                                     "--", "-p", "y"])
    assert selection.load == ["a.b", "c", "extra", "d"]
    assert selection.block == {"moe", "rl", "mla"}
    assert selection.autoload is False
    assert rest == ["--x", "1", "--", "-p", "y"]


def _tracers():
    return [Tracer("t0"), Tracer("t1", after=("t0",)), Tracer("t2", after=("t1",)),
            Tracer("t3", before=("t1",)), Tracer("t4"), Tracer("t5", after=("t0", "t4"))]


def test_order_is_topological_and_independent_of_registration_order(make_kernel):
    traces = set()
    rng = random.Random(20261202)
    for _ in range(40):
        plugins = _tracers()
        rng.shuffle(plugins)
        kernel = make_kernel(*plugins)
        traces.add(tuple(kernel.resolve([], environ={}).trace))
    assert len(traces) == 1
    trace = traces.pop()
    order = [step.split(":")[1] for step in trace if step.startswith("derive:")]
    assert order.index("t0") < order.index("t1") < order.index("t2")
    assert order.index("t3") < order.index("t1")
    assert order.index("t4") < order.index("t5") and order.index("t0") < order.index("t5")
    # every normalize hook runs before any derive hook
    assert [s.split(":")[0] for s in trace] == ["normalize"] * 6 + ["derive"] * 6


def test_cycle_is_a_clear_error(make_kernel):
    with pytest.raises(PluginError, match="cycle among: a, b"):
        make_kernel(Tracer("a", after=("b",)), Tracer("b", after=("a",)))


def test_unknown_required_plugin_is_a_clear_error(make_kernel):
    with pytest.raises(PluginError, match="'a' .* must run after 'ghost', which is not installed"):
        make_kernel(Tracer("a", after=("ghost",)))


def test_two_plugins_with_one_name_are_a_clear_error(make_kernel):
    with pytest.raises(PluginError, match="two plugins are named 'a'"):
        make_kernel(Tracer("a"), Tracer("a"))


def test_after_a_blocked_plugin_is_fine(make_kernel):
    kernel = make_kernel(Tracer("t0"), Tracer("a", after=("t0",)), block=("t0",))
    assert kernel.plugins.order == ["a"]


def test_unavailable_plugin_adds_no_flags_and_its_flags_say_why(make_kernel):
    kernel = make_kernel(Core(), NeedsMissingPackage())
    record = kernel.plugins.records["needy"]
    assert record.status == "unavailable"
    assert record.reason == "requires surely_not_installed_pkg_xyz, not installed"
    assert "needy_level" not in kernel.table
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--needy-level", "3"], environ={})
    problem = info.value.problems[0]
    assert problem.plugin == "needy"
    assert "--needy-level belongs to plugin 'needy', which is unavailable: requires " \
           "surely_not_installed_pkg_xyz, not installed" in problem.message


def test_blocked_plugin_flags_name_the_plugin(make_kernel):
    kernel = make_kernel(Core(), block=("core",))
    assert kernel.plugins.records["core"].status == "blocked"


def _entry_point(name, value, dist):
    from megaplug.cache._entry_points import EntryPointInfo

    return EntryPointInfo(name, value, dist, "9.9")


@pytest.fixture
def fake_entry_points(monkeypatch):
    good = types.ModuleType("fake_good_plugin")
    good.megaplug_plugin = Core.megaplug_plugin
    good.add_args = Core.add_args.__get__(Core())
    monkeypatch.setitem(sys.modules, "fake_good_plugin", good)
    broken_source = "raise ImportError('needs a GPU driver')"
    broken = types.ModuleType("fake_broken_plugin")
    monkeypatch.setitem(sys.modules, "fake_broken_plugin", None)  # import fails
    points = [_entry_point("core", "fake_good_plugin", "megaplug-core-dist"),
              _entry_point("shaky", "fake_broken_plugin", "megaplug-shaky")]
    monkeypatch.setattr("megaplug._plugins._entry_points", lambda: points)
    return broken, broken_source


def test_entry_points_are_discovered_with_distribution(fake_entry_points):
    plugins = PluginSet(PluginSelection(), builtins=())
    core = plugins.records["core"]
    assert core.status == "active" and core.distribution == "megaplug-core-dist"
    assert core.version == "9.9" and core.entry_point == "core = fake_good_plugin"
    shaky = plugins.records["shaky"]
    assert shaky.status == "broken" and "import failed" in shaky.reason
    assert shaky.where() == "entry point shaky = fake_broken_plugin, distribution megaplug-shaky"


def test_broken_plugin_is_reported_on_resolve_and_can_be_blocked(fake_entry_points):
    from megaplug._kernel import Kernel

    kernel = Kernel(PluginSet(PluginSelection(), builtins=()))
    with pytest.raises(ConfigError,
                       match="plugin 'shaky' .*distribution megaplug-shaky.* is broken"):
        kernel.resolve([], environ={})
    kernel = Kernel(PluginSet(PluginSelection(block={"shaky"}), builtins=()))
    assert kernel.resolve([], environ={}).num_layers == 2


def test_disabling_autoload_skips_entry_points(fake_entry_points):
    plugins = PluginSet(PluginSelection(autoload=False), builtins=())
    assert plugins.records == {}
    plugins = PluginSet(PluginSelection(autoload=False, load=["core"]), builtins=())
    assert plugins.records["core"].status == "active"


def test_entry_point_discovery_is_cached_on_disk(tmp_path, monkeypatch):
    from megaplug.cache import _entry_points

    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    scans = []
    # a cached entry point is used only while the entry_points.txt it names declares it
    declared = tmp_path / "site" / "toy_dist-1.0.dist-info" / "entry_points.txt"
    declared.parent.mkdir(parents=True)
    declared.write_text("[megaplug]\ntoy = toy_module_plugin\n")
    monkeypatch.syspath_prepend(str(declared.parent.parent))
    fake = [_entry_points.EntryPointInfo("toy", "toy_module_plugin", "toy-dist", "1.0",
                                         str(declared))]
    monkeypatch.setattr(_entry_points, "scan", lambda: scans.append(1) or fake)
    _entry_points.forget()
    assert _entry_points.entry_points() == fake
    _entry_points.forget()
    assert _entry_points.entry_points() == fake  # second process-equivalent: from the file
    assert scans == [1]
    assert len(list(tmp_path.glob("entry-points-*.json"))) == 1  # one file per environment
    # a change on sys.path (an install) changes the fingerprint, so the cache is rebuilt
    (tmp_path / "new-site" / "new_dist-1.0.dist-info").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path / "new-site")])
    _entry_points.forget()
    _entry_points.entry_points()
    assert scans == [1, 1]
    _entry_points.forget()


def test_cached_entry_point_loads_module_attribute():
    from megaplug.cache._entry_points import EntryPointInfo

    assert EntryPointInfo("x", "toy_plugins:Core", None, None).load().__name__ == "Core"


def test_installed_version_is_read_without_importlib_metadata(tmp_path, monkeypatch):
    from megaplug.environment._environment import _installed_version

    package = tmp_path / "fancy_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (tmp_path / "Fancy_Pkg-3.4.5.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _installed_version("fancy_pkg") == "3.4.5"
    assert _installed_version("surely_not_installed_pkg_xyz") is None
