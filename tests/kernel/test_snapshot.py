"""The flag table across processes (``_snapshot``): the same table as declaring it, no
options module imported while it holds, a new declaration when a plugin changes, and a
tampered file that is never trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import megaplug
from megaplug.cache import _flag_table as _snapshot
from megaplug._kernel import Kernel
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
PARITY = Path(__file__).resolve().parents[3] / "shared" / "parity" / "cases"
CASES = ["gpt__gpt3_mcore_te_tp1_pp4_vp1", "mixtral__mixtral_8x7b_tp1pp4ep8vpp8_release",
         "hybrid__hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    for name in ("MEGAPLUG_PLUGINS", "MEGAPLUG_DISABLE", "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache"


def kernel(snapshot: bool) -> Kernel:
    return Kernel(PluginSet(PluginSelection.from_environment()), snapshot=snapshot)


def same_spec(declared, read) -> bool:
    for name in _snapshot._FIELDS:
        mine, theirs = getattr(declared, name), getattr(read, name)
        if name == "type" and hasattr(mine, "__megaplug_enum__"):  # a fresh enum_by_name
            if mine.__megaplug_enum__ is not theirs.__megaplug_enum__:
                return False
        elif mine != theirs or type(mine) is not type(theirs):
            return False
    return True


def test_the_table_read_back_is_the_table_declared(cache):
    declared, stored = kernel(snapshot=False), kernel(snapshot=True)
    read = kernel(snapshot=True)
    assert list(cache.glob("flag-table-*.json"))
    assert len(read.table.specs) == len(declared.table.specs) > 800
    assert all(same_spec(a, b) for a, b in zip(declared.table, read.table))
    assert read.table.mutex_groups == declared.table.mutex_groups
    assert read.inactive_flags.keys() == declared.inactive_flags.keys()
    assert {name: [s.dest for s in specs] for name, specs in read.inactive_specs.items()} == {
        name: [s.dest for s in specs] for name, specs in declared.inactive_specs.items()}
    assert all(isinstance(ref, str) for ref in read.table.options_classes.values())
    assert stored.table.options_classes.keys() == read.table.options_classes.keys()


@pytest.mark.parametrize("name", CASES)
def test_a_resolve_from_the_snapshot_equals_one_from_declaring(cache, name):
    case = json.loads((PARITY / f"{name}.json").read_text())
    kernel(snapshot=True)  # stores
    results = []
    for table_from_snapshot in (False, True):
        target = megaplug.TargetEnvironment(
            packages=dict(case["assume"]["packages"]),
            device_capability=tuple(case["assume"]["device_capability"]), environ=case["env"])
        resolved = kernel(snapshot=table_from_snapshot).resolve(
            case["argv"], environ=case["env"], defaults=case["args_defaults"], target=target)
        results.append((resolved.to_dict(), {k: str(v) for k, v in resolved.provenance().items()}))
    assert results[0] == results[1]


def test_options_classes_are_imported_on_first_use(cache):
    kernel(snapshot=True)
    read = kernel(snapshot=True)
    assert read.table.options_classes["model"] == "megaplug.builtin.model.options:ModelOptions"
    from megaplug.builtin.model.options import ModelOptions

    assert read.table.options_class("model") is ModelOptions
    assert read.table.options_classes["model"] is ModelOptions


def test_plugin_objects_are_never_snapshotted(cache):
    from toy_plugins import Core

    Kernel(PluginSet(PluginSelection(autoload=False), builtins=(Core(),)), snapshot=True)
    assert not list(cache.glob("flag-table-*.json"))


# -- in fresh processes ----------------------------------------------------------------

RESOLVE = textwrap.dedent("""
    import contextlib, io, json, sys
    from megaplug.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(json.loads(sys.argv[1]))
    print(json.dumps({"code": code, "out": out.getvalue(),
                      "options": sorted(m for m in sys.modules if m.endswith(".options"))}))
""")

TOY_PLUGIN = textwrap.dedent('''
    """A plugin package whose options module is imported only by add_args."""
    from megaplug import FlagDeclarations, PluginInfo, hookimpl

    megaplug_plugin = PluginInfo(name="toysnap")


    @hookimpl
    def add_args(flags: FlagDeclarations) -> None:
        from .options import ToyOptions

        flags.add_options(ToyOptions)
''')

TOY_OPTIONS = textwrap.dedent("""
    from typing import Optional

    from megaplug import Flag, options


    @options
    class ToyOptions:
        toy_alpha: int = Flag(default=1, help="Alpha.")
""")


class Project:
    """A toy plugin package on PYTHONPATH, built-ins and entry points off, a private cache."""

    def __init__(self, root: Path) -> None:
        package = root / "code" / "megaplug_toysnap"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(TOY_PLUGIN)
        (package / "options.py").write_text(TOY_OPTIONS)
        self.options = package / "options.py"
        old = time.time() - 3600
        for path in (package / "__init__.py", self.options, package, package.parent):
            os.utime(path, (old, old))
        self.cache = root / "cache"
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_NO_CACHE")}
        self.env.update(
            MEGAPLUG_CACHE_DIR=str(self.cache), MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD="1",
            MEGAPLUG_PLUGINS="megaplug_toysnap", PYTHONDONTWRITEBYTECODE="1",
            MEGAPLUG_DISABLE="model,parallel,precision,training,checkpointing,data,logging,"
                             "resilience,experimental",
            PYTHONPATH=os.pathsep.join([str(package.parent), os.environ.get("PYTHONPATH", "")]))
        self.cwd = root

    def run(self, *argv: str) -> dict:
        done = subprocess.run([sys.executable, "-c", RESOLVE, json.dumps(list(argv))],
                              capture_output=True, text=True, env=self.env, cwd=self.cwd)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def snapshot_file(self) -> Path:
        """The table written last (one is kept per key)."""
        return max(self.cache.glob("flag-table-*.json"), key=lambda p: p.stat().st_mtime_ns)


@pytest.fixture
def project(tmp_path):
    return Project(tmp_path)


def test_a_process_with_a_snapshot_imports_no_options_module(project):
    first = project.run("resolve", "--", "--toy-alpha", "3")
    assert first["options"] == ["megaplug_toysnap.options"]  # declared, and stored
    second = project.run("resolve", "--", "--toy-alpha", "3")
    assert second["options"] == []
    assert json.loads(second["out"])["toy_alpha"] == 3 == json.loads(first["out"])["toy_alpha"]


def test_an_edited_options_module_is_declared_again(project):
    project.run("resolve")
    assert project.run("resolve")["options"] == []
    stat = project.options.stat()
    project.options.write_text(TOY_OPTIONS + '    toy_beta: Optional[int] = Flag(default=None, '
                                             'help="Beta.")\n')
    os.utime(project.options, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the mtime put back
    edited = project.run("resolve", "--", "--toy-beta", "5")
    assert edited["code"] == 0 and json.loads(edited["out"])["toy_beta"] == 5
    assert edited["options"] == ["megaplug_toysnap.options"]


def test_a_table_with_a_value_it_cannot_name_is_declared_every_time(project):
    project.options.write_text(TOY_OPTIONS.replace('help="Alpha.")',
                                                   'help="Alpha.", type=lambda t: int(t))'))
    os.utime(project.options, (time.time() - 3600,) * 2)
    assert json.loads(project.run("resolve", "--", "--toy-alpha", "4")["out"])["toy_alpha"] == 4
    assert json.loads(project.snapshot_file().read_text())["value"] == {"table": None}
    again = project.run("resolve", "--", "--toy-alpha", "4")
    assert again["options"] == ["megaplug_toysnap.options"]  # declared again: nothing to read


def tamper(project: Project, change) -> None:
    path = project.snapshot_file()
    stored = json.loads(path.read_text())
    change(stored["value"]["table"])
    path.write_text(json.dumps(stored))


def _spec_row(table: dict, dest: str) -> list:
    return next(row for row in table["specs"] if row[0] == dest)


@pytest.mark.parametrize("change", [
    lambda t: _spec_row(t, "toy_alpha").__setitem__(5, {"ref": "os:system"}),
    lambda t: _spec_row(t, "toy_alpha").__setitem__(5, {"ref": "subprocess:getoutput"}),
    lambda t: _spec_row(t, "toy_alpha").__setitem__(5, {"enum_by_name": "os:environ"}),
    lambda t: _spec_row(t, "toy_alpha").__setitem__(6, {"enum": "signal:Signals",
                                                        "name": "NOPE"}),
    lambda t: _spec_row(t, "toy_alpha").__setitem__(0, 7),
    lambda t: _spec_row(t, "toy_alpha").pop(),
    lambda t: t["specs"].append(["toy_alpha"] * 16),
    lambda t: t.__setitem__("specs", {"toy_alpha": 1}),
    lambda t: t["options_classes"].__setitem__("toysnap", {"ref": "os:system"}),
    lambda t: t.__setitem__("mutex_groups", 5),
    lambda t: t.pop("inactive"),
], ids=["type-os-system", "type-getoutput", "enum-not-an-enum", "unknown-member",
        "dest-not-text", "short-row", "duplicate-dest", "specs-object",
        "options-class-outside", "mutex-not-list", "no-inactive"])
def test_a_tampered_snapshot_is_declared_again_and_never_followed(project, tmp_path, change):
    project.run("resolve")
    tamper(project, change)
    marker = tmp_path / "pwned"
    result = project.run("resolve", "--", "--toy-alpha", f"$(touch {marker})")
    assert not marker.exists()
    assert result["code"] == 2  # "$(touch ...)" is not an int: the declared type said so
    assert result["options"] == ["megaplug_toysnap.options"]
    stored = json.loads(project.snapshot_file().read_text())["value"]["table"]
    assert _spec_row(stored, "toy_alpha")[5] == {"builtin": "int"}  # rewritten whole


def test_each_way_of_starting_python_keeps_its_own_snapshot(project):
    """``python -c``, ``python -m megaplug`` and a script: different sys.path[0], no thrash."""
    def module_run() -> list[str]:
        code = ("import runpy, sys; sys.argv = ['megaplug', 'resolve']; "
                "runpy.run_module('megaplug', run_name='__main__')")
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                              capture_output=True, text=True, env=project.env, cwd=project.cwd)
        return [line for line in done.stderr.splitlines() if "megaplug_toysnap.options" in line]

    project.run("resolve")
    module_run()
    assert project.run("resolve")["options"] == []
    assert module_run() == []
    assert project.run("resolve")["options"] == []
