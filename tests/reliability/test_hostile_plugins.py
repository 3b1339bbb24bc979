"""Broken and hostile plugins: each gets a clear error naming it; ``megaplug list`` still works.

Each hostile plugin is a real module on ``sys.path``, loaded either with ``-p NAME`` or
as an installed entry point (``megaplug._plugins._entry_points`` extended), next to every
built-in and installed plugin. One test installs a real distribution (a ``.dist-info``
with ``entry_points.txt``) and runs ``python -m megaplug`` in a subprocess.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug import _api
from megaplug.cli import main
from megaplug.sources._selection import SHIPPED_DISTRIBUTIONS as SHIPPED
from megaplug.cache._entry_points import EntryPointInfo, entry_points

HEADER = "from megaplug import PluginInfo, hookimpl\n"

HOSTILE = {
    "hostile_import": "raise RuntimeError('needs a GPU driver that is not here')\n",
    "hostile_add_args": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_add_args")
        @hookimpl
        def add_args(flags):
            raise KeyError("declared nothing")
    """),
    "hostile_normalize": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_normalize")
        @hookimpl
        def normalize(config):
            config.num_layers.upper()
    """),
    "hostile_derive": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_derive", after=("model",))
        @hookimpl
        def derive(config):
            return config.hidden_size // 0
    """),
    "hostile_validate": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_validate")
        @hookimpl
        def validate(config):
            return [None]  # not a Problem
    """),
    "hostile_mutator": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_mutator", after=("model",))
        @hookimpl
        def add_args(flags):
            flags.add_argument("--hostile-sizes", type=int, nargs="+", default=[1, 2],
                               help="Sizes the hostile plugin tampers with.")
        @hookimpl
        def validate(config):
            config.hostile_sizes.append(3)
    """),
    "hostile_setter": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_setter", after=("model",))
        @hookimpl
        def validate(config):
            config.set("num_layers", 99)
    """),
    "hostile_owner": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_owner")
        @hookimpl
        def add_args(flags):
            flags.add_argument("--num-layers", type=int, default=1, help="Stolen.")
    """),
    "hostile_cycle_a": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_cycle_a", after=("hostile_cycle_b",))
        @hookimpl
        def validate(config):
            pass
    """),
    "hostile_cycle_b": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_cycle_b", after=("hostile_cycle_a",),
                                     before=("model",))
        @hookimpl
        def validate(config):
            pass
    """),
    "hostile_after_ghost": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="hostile_after_ghost", after=("no_such_plugin",))
    """),
}

#: plugin(s) to load -> (name, status in ``megaplug list``, text the error must contain)
CASES = {
    "import": (["hostile_import"], "hostile_import", "broken",
               "RuntimeError: needs a GPU driver that is not here"),
    "add_args": (["hostile_add_args"], "hostile_add_args", "broken",
                 "KeyError"),
    "normalize": (["hostile_normalize"], "hostile_normalize", "active",
                  "raised AttributeError in normalize"),
    "derive": (["hostile_derive"], "hostile_derive", "active",
               "raised ZeroDivisionError in derive"),
    "validate": (["hostile_validate"], "hostile_validate", "active",
                 "raised AttributeError in validate"),
    "mutator": (["hostile_mutator"], "hostile_mutator", "active",
                "plugin 'hostile_mutator' changed hostile_sizes in validate"),
    "setter": (["hostile_setter"], "hostile_setter", "active", "num_layers"),
    "owner": (["hostile_owner"], "hostile_owner", "broken",
              "plugins 'model' and 'hostile_owner' both declare the setting 'num_layers'"),
    "cycle": (["hostile_cycle_a", "hostile_cycle_b"], "hostile_cycle_a", "broken",
              "plugin ordering has a cycle among: hostile_cycle_a, hostile_cycle_b"),
    "after_ghost": (["hostile_after_ghost"], "hostile_after_ghost", "broken",
                    "must run after 'no_such_plugin', which is not installed"),
}


@pytest.fixture
def hostile_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hostile modules importable; kernel caches and imported copies dropped after."""
    for name, source in HOSTILE.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_api, "_KERNELS", {})
    yield tmp_path
    for name in HOSTILE:
        sys.modules.pop(name, None)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _controls(modules: list[str]) -> list[str]:
    return [token for module in modules for token in ("-p", module)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_plugin_by_name_is_named_and_list_still_works(hostile_path: Path, case: str):
    modules, name, status, text = CASES[case]
    code, out, err = _cli("list", "--json", *_controls(modules))
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows[name]["status"] == status
    assert rows["model"]["status"] == "active" and rows["moe"]["status"] == "active"
    if status == "broken":
        assert text in rows[name]["reason"]
    code, out, err = _cli("list", *_controls(modules))
    assert code == 0 and name in out

    code, out, err = _cli("resolve", "--assume-device-capability", "none",
                          *_controls(modules), "--", *MINIMAL)
    assert code == 2, out
    assert "Traceback" not in err
    naming = [line for line in err.splitlines() if name in line]
    assert naming and any(text in line for line in naming), err
    assert all("hint:" in line for line in naming if line.startswith("  - "))


@pytest.mark.parametrize("case", sorted(set(CASES) - {"cycle"}))
def test_blocking_the_hostile_plugin_restores_a_clean_resolve(hostile_path: Path, case: str):
    modules, name, _status, _text = CASES[case]
    blocks = [token for module in modules for token in ("-p", f"no:{module}")]
    code, out, err = _cli("resolve", "--assume-device-capability", "none",
                          *_controls(modules), *blocks, "--", *MINIMAL)
    assert code == 0, err
    assert json.loads(out)["num_layers"] == 2


def test_the_kernel_reports_each_hostile_phase_as_a_problem_of_that_plugin(hostile_path: Path):
    kernel, rest = megaplug.load(_controls(["hostile_normalize", "hostile_derive",
                                            "hostile_validate", "hostile_mutator",
                                            "hostile_setter"]))
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL], environ={},
                       target=megaplug.TargetEnvironment(device_capability=None))
    by_plugin = {p.plugin: p for p in info.value.problems}
    assert "ZeroDivisionError in derive" in by_plugin["hostile_derive"].message
    assert "AttributeError in normalize" in by_plugin["hostile_normalize"].message
    assert "-p no:hostile_derive" in by_plugin["hostile_derive"].hint
    assert by_plugin["hostile_mutator"].flags == ("hostile_sizes",)
    assert "validate must only report problems" in by_plugin["hostile_mutator"].hint
    assert "move the change to a derive or normalize hook" in by_plugin["hostile_setter"].hint
    # the tampering never reaches anybody: the other plugins' checks still ran on true values
    assert not [p for p in info.value.problems if p.plugin in ("model", "parallel", "training")]


def test_a_cycle_fails_resolve_cleanly_from_the_library_too(hostile_path: Path):
    with pytest.raises(megaplug.PluginError, match="cycle among: hostile_cycle_a, hostile_cycle_b"):
        megaplug.load(_controls(["hostile_cycle_a", "hostile_cycle_b"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_plugin_as_an_entry_point(hostile_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          case: str):
    modules, name, status, text = CASES[case]
    installed = list(entry_points())
    hostile = [EntryPointInfo(module, module, f"{module.replace('_', '-')}-dist", "6.6.6")
               for module in modules]
    monkeypatch.setattr("megaplug._plugins._entry_points", lambda: installed + hostile)
    code, out, err = _cli("list", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows[name]["status"] == status
    assert rows[name]["distribution"] == f"{modules[0].replace('_', '-')}-dist" or case == "cycle"
    code, out, err = _cli("resolve", "--assume-device-capability", "none", "--", *MINIMAL)
    assert code == 2 and "Traceback" not in err
    assert any(name in line and text in line for line in err.splitlines()), err


def test_an_installed_broken_distribution_in_a_real_process(tmp_path: Path):
    """A real .dist-info on PYTHONPATH: ``python -m megaplug list`` and ``resolve``."""
    site = tmp_path / "site"
    dist_info = site / "megaplug_hostile-1.0.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: megaplug-hostile\n"
                                        "Version: 1.0\n")
    (dist_info / "entry_points.txt").write_text(
        "[megaplug]\nhostile_import = hostile_import\nhostile_derive = hostile_derive\n")
    for module in ("hostile_import", "hostile_derive"):
        (site / f"{module}.py").write_text(HOSTILE[module])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MEGAPLUG_", "RANK", "WORLD_SIZE"))}
    env.update(PYTHONPATH=os.pathsep.join([str(site), env.get("PYTHONPATH", "")]),
               MEGAPLUG_NO_CACHE="1")
    listing = subprocess.run([sys.executable, "-m", "megaplug", "list"], env=env,
                             capture_output=True, text=True)
    assert listing.returncode == 0, listing.stderr
    assert "hostile_import  broken" in listing.stdout.replace("   ", "  ") or \
        any(line.startswith("hostile_import") and "broken" in line
            for line in listing.stdout.splitlines())
    assert "megaplug-hostile" in listing.stdout
    resolved = subprocess.run(
        [sys.executable, "-m", "megaplug", "resolve", "--assume-device-capability", "none",
         "--", *MINIMAL], env=env, capture_output=True, text=True)
    assert resolved.returncode == 2 and "Traceback" not in resolved.stderr
    assert "plugin 'hostile_import' (entry point hostile_import = hostile_import, " \
           "distribution megaplug-hostile) is broken" in resolved.stderr
    assert "plugin 'hostile_derive'" in resolved.stderr
    assert "raised ZeroDivisionError in derive" in resolved.stderr


# -- a third-party plugin cannot harm a shipped one: the newcomer is the one refused ---------

NEWCOMERS = {
    "steals_num_experts": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="steals_num_experts")
        @hookimpl
        def add_args(flags):
            flags.add_argument("--num-experts", type=int, default=None, help="Mine.")
    """),
    "steals_moe_dest": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="steals_moe_dest")
        @hookimpl
        def add_args(flags):
            flags.add_argument("--my-experts", dest="moe_router_topk", type=int, default=2,
                               help="Mine.")
    """),
    "named_moe": HEADER + "megaplug_plugin = PluginInfo(name='moe')\n",
    "named_parallel": HEADER + "megaplug_plugin = PluginInfo(name='parallel')\n",
    "contradicts_model": HEADER + "megaplug_plugin = PluginInfo(name='contradicts_model', "
                         "after=('model',), before=('model',))\n",
    "contradicts_moe": HEADER + "megaplug_plugin = PluginInfo(name='contradicts_moe', "
                       "after=('moe',), before=('model',))\n",
    "unblockable": HEADER + "megaplug_plugin = PluginInfo(name='no:x y')\n",
    "reads_config": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="reads_config")
        @hookimpl
        def add_args(flags):
            flags.add_argument("--config", help="Never reaches me.")
    """),
    "reads_p": HEADER + textwrap.dedent("""
        megaplug_plugin = PluginInfo(name="reads_p")
        @hookimpl
        def add_args(flags):
            flags.add_argument("-pp", "--pipeline-thing", type=int, help="-pp is -p p.")
    """),
    "bad_table": "from megaplug import PluginInfo, Rules\n"
                 "megaplug_plugin = PluginInfo(name='bad_table', "
                 "rules=Rules(validate=('bad_table:CHECKS',)))\n"
                 "def check(config):\n    return []\n"
                 "CHECKS = [check, 'check_two']\n",
}

#: module -> (the name it is listed under, what its reason must say)
REFUSED = {
    "steals_num_experts": ("steals_num_experts",
                           "plugins 'moe' and 'steals_num_experts' both declare the setting "
                           "'num_experts'"),
    "steals_moe_dest": ("steals_moe_dest", "both declare the setting 'moe_router_topk'"),
    "named_moe": ("named_moe", "its PluginInfo names it 'moe', which plugin 'moe' (entry point "
                  "moe = megaplug_moe"),
    "named_parallel": ("named_parallel", "its PluginInfo names it 'parallel', which plugin "
                       "'parallel' (distribution megaplug) already has"),
    "contradicts_model": ("contradicts_model", "plugin ordering has a cycle among: "
                          "contradicts_model, model"),
    "contradicts_moe": ("contradicts_moe", "plugin ordering has a cycle among: "
                        "contradicts_moe, model, moe"),
    "unblockable": ("no:x y", "its name 'no:x y' cannot be blocked with -p no:NAME"),
    "reads_config": ("reads_config", "declares the flag --config, which megaplug reads "
                     "itself (config files)"),
    "reads_p": ("reads_p", "declares the flag -pp, which megaplug reads itself (the plugin "
                "selection"),
}


@pytest.fixture
def newcomers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install each newcomer as an entry point of its own distribution (named after its
    module, loaded before the shipped ones would be in an alphabetical scan)."""
    for name, source in NEWCOMERS.items():
        (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    # check_plugin imports the package in a fresh interpreter too
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setattr(_api, "_KERNELS", {})
    installed = list(entry_points())

    def install(*modules: str) -> None:
        extra = [EntryPointInfo(module, module, f"aaa-{module}", "1.0") for module in modules]
        monkeypatch.setattr("megaplug._plugins._entry_points", lambda: extra + installed)

    yield install
    for name in NEWCOMERS:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("module", sorted(REFUSED))
def test_a_newcomer_is_refused_and_every_shipped_plugin_stays_active(newcomers, module):
    listed, reason = REFUSED[module]
    newcomers(module)
    code, out, err = _cli("list", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert rows[listed]["status"] == "broken"
    assert reason in rows[listed]["reason"]
    shipped = {name: row["status"] for name, row in rows.items() if name != listed
               and (row["source"] == "builtin" or row["distribution"] in SHIPPED)}
    assert set(shipped.values()) <= {"active", "unavailable"}, shipped
    assert shipped["moe"] == shipped["parallel"] == shipped["model"] == "active"


@pytest.mark.parametrize("module", sorted(set(REFUSED) - {"contradicts_model",
                                                          "contradicts_moe", "unblockable"}))
def test_a_resolve_blames_the_newcomer_and_blocking_it_restores_the_shipped(newcomers, module):
    listed, reason = REFUSED[module]
    newcomers(module)
    code, out, err = _cli("resolve", "--assume-device-capability", "none", "--", *MINIMAL,
                          "--num-experts", "4")
    assert code == 2 and "Traceback" not in err
    problems = [line for line in err.splitlines() if line.startswith("  - ")]
    assert all(listed in line and f"-p no:{listed}" in line for line in problems), err
    assert not [line for line in problems if "moe" in line and listed not in line]
    code, out, err = _cli("resolve", "--assume-device-capability", "none", "-p",
                          f"no:{listed}", "--", *MINIMAL, "--num-experts", "4")
    assert code == 0, err
    assert json.loads(out)["num_experts"] == 4


@pytest.mark.parametrize("module", sorted(REFUSED))
def test_check_plugin_names_what_is_wrong_with_the_newcomer(newcomers, module):
    from megaplug.testing import check_plugin

    listed, reason = REFUSED[module]
    newcomers(module)
    found = check_plugin(module)
    assert any(reason in message for message in found), found


def test_a_rule_table_holding_what_is_not_a_rule_says_so(newcomers):
    from megaplug.testing import check_plugin

    newcomers("bad_table")
    found = check_plugin("bad_table")
    assert len(found) == 1
    assert found[0].startswith(
        "[bad_table] plugin 'bad_table': the rules bad_table:CHECKS: bad_table:CHECKS[1] is "
        "'check_two' (a str), not a rule (a function taking the configuration) (hint: ")
    assert "did you mean" not in found[0]


def test_check_plugin_of_a_package_that_is_not_installed():
    from megaplug.testing import check_plugin

    assert check_plugin("megaplug_no_such_plugin_here") == [
        "megaplug_no_such_plugin_here cannot be imported: no module of that name is on "
        "sys.path (is the plugin installed, pip install -e DIR?)"]


def test_check_plugin_of_a_package_that_fails_to_import(tmp_path, monkeypatch):
    from megaplug.testing import check_plugin

    (tmp_path / "raises_on_import.py").write_text("raise RuntimeError('no GPU here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path),
                                                      os.environ.get("PYTHONPATH", "")]))
    assert check_plugin("raises_on_import") == [
        "importing raises_on_import fails: RuntimeError: no GPU here"]


def test_the_shipped_distributions_are_the_plugins_directory():
    root = Path(__file__).resolve().parents[2]
    shipped = {path.parent.name for path in (root / "plugins").glob("*/pyproject.toml")}
    assert SHIPPED == shipped


def test_an_entry_point_named_as_a_shipped_plugin_is_the_one_not_loaded(newcomers,
                                                                       monkeypatch):
    installed = [entry for entry in entry_points() if entry.name != "named_moe"]
    impostor = EntryPointInfo("moe", "named_moe", "aaa-impostor", "1.0")
    monkeypatch.setattr("megaplug._plugins._entry_points", lambda: [impostor, *installed])
    code, out, err = _cli("list", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert (rows["moe"]["distribution"], rows["moe"]["status"]) == ("megaplug-moe", "active")
    code, out, _ = _cli("list")
    assert ("problem: entry point 'moe' of distribution aaa-impostor (moe = named_moe) is not "
            "loaded: plugin 'moe' (entry point moe = megaplug_moe, distribution megaplug-moe) "
            "already has that name (hint: rename the entry point, or uninstall aaa-impostor)"
            in out)
