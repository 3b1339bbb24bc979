"""Every way the on-disk caches could go stale or be fed a bad file.

The entry-point cache must follow the installed distributions' metadata, edited in place
or not; ``megaplug list``'s cache must follow every module the plugins import, wherever it
lives. A cache file that is corrupt, foreign, or of the right fingerprint but the wrong
shape is recomputed, never trusted and never a traceback. Each test first shows the cache
is used (nothing recomputed), so that "recomputed after the change" means something.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from importlib.metadata import MetadataPathFinder
from pathlib import Path

import pytest

from megaplug.cache import _entry_points, _store

AN_HOUR_AGO = time.time() - 3600


def backdate(*paths: Path) -> None:
    """Give paths an old modification time, as files installed a while ago have."""
    for path in paths:
        os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))


def rewrite_keeping_mtimes(path: Path, text: str) -> None:
    """Edit a file in place and put back its own and its directory's modification time,
    as a careful tool (or an unlucky clock) would: only the file's other stat changes."""
    stat, parent = path.stat(), path.parent.stat()
    path.write_text(text)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.utime(path.parent, ns=(parent.st_atime_ns, parent.st_mtime_ns))


# -- the entry-point cache ---------------------------------------------------------------


def make_distribution(site: Path, name: str, version: str, entry_points: dict[str, str]) -> Path:
    metadata = site / f"{name.replace('-', '_')}-{version}.dist-info"  # as pip names it
    metadata.mkdir()
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entry_points.items())
    (metadata / "entry_points.txt").write_text(f"[megaplug]\n{lines}")
    backdate(metadata / "METADATA", metadata / "entry_points.txt", metadata, site)
    return metadata


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(directory))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    _entry_points.forget()
    yield directory
    _entry_points.forget()


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory of installed distributions at the front of ``sys.path``."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    return directory


@pytest.fixture
def scans(monkeypatch):
    """The real scan, counted."""
    calls: list[int] = []
    real = _entry_points.scan
    monkeypatch.setattr(_entry_points, "scan", lambda: calls.append(1) or real())
    return calls


def ours() -> dict[str, tuple[str, str | None]]:
    """This test's entry points (the environment's own plugins are installed too), looked up
    as a new process would: importlib.metadata's own listing cache (keyed on directory
    mtimes, which these tests put back) is dropped."""
    MetadataPathFinder().invalidate_caches()
    _entry_points.forget()
    return {ep.name: (ep.value, ep.version) for ep in _entry_points.entry_points()
            if (ep.distribution or "").startswith("stale-test")}


def test_an_unchanged_installation_is_read_from_the_cache(cache_dir, site, scans):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1]
    assert len(list(cache_dir.glob("entry-points-*.json"))) == 1


def test_an_in_place_edit_of_entry_points_txt(cache_dir, site, scans):
    metadata = make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == {"alpha": ("alpha_mod", "1.0")} and ours() and scans == [1]
    rewrite_keeping_mtimes(metadata / "entry_points.txt",
                           "[megaplug]\nalpha = alpha_mod\nbeta = beta_mod\n")
    assert ours() == {"alpha": ("alpha_mod", "1.0"), "beta": ("beta_mod", "1.0")}
    assert scans == [1, 1]


def test_an_edit_of_the_same_size_with_its_mtime_put_back(cache_dir, site, scans):
    metadata = make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == {"alpha": ("alpha_mod", "1.0")} and ours() and scans == [1]
    rewrite_keeping_mtimes(metadata / "entry_points.txt", "[megaplug]\nalpha = omega_mod\n")
    assert ours() == {"alpha": ("omega_mod", "1.0")}


def test_an_in_place_edit_of_metadata(cache_dir, site, scans):
    metadata = make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == {"alpha": ("alpha_mod", "1.0")} and ours() and scans == [1]
    rewrite_keeping_mtimes(metadata / "METADATA",
                           "Metadata-Version: 2.1\nName: stale-test\nVersion: 1.1\n")
    assert ours() == {"alpha": ("alpha_mod", "1.1")}


def remove_distribution(metadata: Path) -> None:
    for file in metadata.iterdir():
        file.unlink()
    metadata.rmdir()


def test_an_install_an_upgrade_and_a_removal(cache_dir, site, scans):
    """Each with the site directory's modification time put back: the listing decides."""
    mtime = site.stat().st_mtime_ns
    assert ours() == {}
    metadata = make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    os.utime(site, ns=(mtime, mtime))
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    remove_distribution(metadata)
    metadata = make_distribution(site, "stale-test", "2.0", {"alpha": "alpha_mod"})
    os.utime(site, ns=(mtime, mtime))
    assert ours() == {"alpha": ("alpha_mod", "2.0")}
    remove_distribution(metadata)
    os.utime(site, ns=(mtime, mtime))
    assert ours() == {}
    assert len(scans) == 4


def test_a_directory_put_on_sys_path(cache_dir, site, scans, monkeypatch):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    other = site.parent / "site2"
    other.mkdir()
    make_distribution(other, "stale-test-two", "3.0", {"gamma": "gamma_mod"})
    with monkeypatch.context() as patch:
        patch.syspath_prepend(str(other))
        assert ours() == {"alpha": ("alpha_mod", "1.0"), "gamma": ("gamma_mod", "3.0")}
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert len(scans) == 3


def test_directories_without_distributions_do_not_split_the_cache(cache_dir, site, scans,
                                                                   tmp_path, monkeypatch):
    """``megaplug`` (its bin directory first on sys.path) and ``python -m megaplug`` (the
    working directory first) share one cache."""
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    for name in ("bin", "cwd"):
        (tmp_path / name).mkdir()
        with monkeypatch.context() as patch:
            patch.setattr(sys, "path", [str(tmp_path / name), *sys.path])
            assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1]


def test_another_python_version_rescans(cache_dir, site, scans, monkeypatch):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    monkeypatch.setattr(sys, "version", sys.version + " (another build)")
    ours()
    assert scans == [1, 1]


def entry_point_cache_file(cache_dir: Path) -> Path:
    (path,) = cache_dir.glob("entry-points-*.json")
    return path


@pytest.mark.parametrize("value", [
    {"alpha": "alpha_mod"},
    "alpha",
    None,
    [["alpha", "alpha_mod", "stale-test", "1.0"]],
    [{"name": "alpha"}],
    [{"name": 1, "value": "alpha_mod", "distribution": None, "version": None}],
    [{"name": "alpha", "value": ["alpha_mod"], "distribution": None, "version": None}],
    [{"name": "alpha", "value": "alpha_mod", "distribution": {}, "version": None}],
    [{"name": "alpha", "value": "alpha_mod", "distribution": None, "version": 1.0}],
], ids=["object", "string", "null", "rows-as-lists", "missing-keys", "int-name", "list-value",
        "object-distribution", "float-version"])
def test_a_tampered_cache_of_the_right_fingerprint_is_recomputed(cache_dir, site, scans,
                                                                 value):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    path = entry_point_cache_file(cache_dir)
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({"fingerprint": stored["fingerprint"], "value": value}))
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1, 1]
    assert json.loads(path.read_text()) == stored  # and rewritten whole


def test_extra_keys_in_cached_rows_are_ignored(cache_dir, site, scans):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    path = entry_point_cache_file(cache_dir)
    stored = json.loads(path.read_text())
    for row in stored["value"]:
        row["added_by_a_newer_megaplug"] = True
    path.write_text(json.dumps(stored))
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1]


@pytest.mark.parametrize("content", [
    b"", b"{", b"not json", b"\xff\xfe\x00garbage", b"[1, 2, 3]", b'"fingerprint"',
    b'{"fingerprint": null}', b"[" * 100_000 + b"]" * 100_000,
    b'{"fingerprint": "x", "value": []}',
], ids=["empty", "truncated", "text", "binary", "list", "string", "null-fingerprint", "deep",
        "other-fingerprint"])
def test_a_corrupt_cache_file_is_recomputed(cache_dir, site, scans, content):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    entry_point_cache_file(cache_dir).write_bytes(content)
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1, 1]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_or_directory_in_the_cache_files_place_does_not_hang(cache_dir, site, scans):
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    ours()
    path = entry_point_cache_file(cache_dir)
    path.unlink()
    os.mkfifo(path)
    assert ours() == {"alpha": ("alpha_mod", "1.0")}  # would block reading a FIFO
    path.unlink()
    path.mkdir()
    assert ours() == {"alpha": ("alpha_mod", "1.0")}
    assert len(scans) == 3


def test_an_unwritable_cache_still_answers(tmp_path, monkeypatch, site, scans):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.delenv("MEGAPLUG_NO_CACHE", raising=False)
    make_distribution(site, "stale-test", "1.0", {"alpha": "alpha_mod"})
    assert ours() == ours() == {"alpha": ("alpha_mod", "1.0")}
    assert scans == [1, 1]
    _entry_points.forget()


def test_a_file_changed_while_computing_is_not_cached(cache_dir, tmp_path, monkeypatch):
    helper = tmp_path / "racy_helper_module.py"
    helper.write_text("VALUE = 1\n")
    backdate(helper)
    monkeypatch.syspath_prepend(str(tmp_path))

    try:
        computed = []

        def compute():
            computed.append(1)
            import racy_helper_module  # noqa: F401  (the computation's import closure)

            helper.write_text("VALUE = 2\n")  # edited after it was imported
            return {"value": 1}

        assert _store.cached("racy", "fp", compute, track_imports=True) == {"value": 1}
        assert not list(cache_dir.glob("racy-*.json"))
        assert _store.cached("racy", "fp", lambda: computed.append(1) or {"value": 2},
                                 track_imports=True) == {"value": 2}
        assert _store.cached("racy", "fp", lambda: pytest.fail("recomputed"),
                                 track_imports=True) == {"value": 2}
    finally:
        sys.modules.pop("racy_helper_module", None)


def test_what_the_process_imported_for_its_own_ends_is_not_checked(cache_dir, tmp_path,
                                                                   monkeypatch):
    # a training script imports torch and Megatron (~3,500 files) before megaplug resolves:
    # every later process would check them all, for answers that never depended on them
    for name in ("unrelated_library_module", "plugin_package_module", "imported_inside"):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import plugin_package_module  # noqa: F401
    import unrelated_library_module  # noqa: F401

    def compute():
        import imported_inside  # noqa: F401

        _store.depends_on_packages(["plugin_package_module"])  # a plugin, loaded earlier
        return {"value": 1}

    try:
        assert _store.cached("closure", "fp", compute, track_imports=True) == {"value": 1}
        imports = json.loads(next(cache_dir.glob("closure-*.json")).read_text())["imports"]
        recorded = {os.path.basename(path) for path in imports}
        assert {"imported_inside.py", "plugin_package_module.py"} <= recorded
        assert "unrelated_library_module.py" not in recorded
        assert any(path.endswith(os.path.join("megaplug", "cache", "_store.py"))
                   for path in imports)  # megaplug's own code, imported before too
    finally:
        for name in ("unrelated_library_module", "plugin_package_module", "imported_inside"):
            sys.modules.pop(name, None)


@pytest.mark.parametrize(("value", "shape", "expected"), [
    (1, int, True), (True, int, False), ("1", int, False), (None, (str, None), True),
    ([], [str], True), (["a", 1], [str], False), ({"a": [1]}, {"a": [int]}, True),
    ({"b": 1}, {"a": int}, False), ({"a": 1, "b": 2}, {"a": int}, True), ([1], {"a": int}, False),
])
def test_conforms(value, shape, expected):
    assert _store.conforms(value, shape) is expected


# -- megaplug list's cache ---------------------------------------------------------------

TOY_PLUGIN = textwrap.dedent("""
    import os

    with open(os.environ["TOY_IMPORT_LOG"], "a") as log:
        log.write(__name__ + "\\n")

    from megaplug import PluginInfo, hookimpl

    from toy_helper import ToyOptions

    try:
        from toy_extra import ExtraOptions
    except ImportError:
        ExtraOptions = None

    megaplug_plugin = PluginInfo(name="toyplug")


    @hookimpl
    def add_args(flags):
        flags.add_options(ToyOptions)
        if ExtraOptions is not None:
            flags.add_options(ExtraOptions)
""")

TOY_HELPER = textwrap.dedent("""
    from dataclasses import dataclass

    from typing_extensions import Annotated

    from megaplug import Flag


    @dataclass
    class ToyOptions:
        toy_alpha: Annotated[int, Flag(help="Alpha.")] = 1
""")

TOY_EXTRA = textwrap.dedent("""
    from dataclasses import dataclass

    from typing_extensions import Annotated

    from megaplug import Flag


    @dataclass
    class ExtraOptions:
        toy_extra: Annotated[int, Flag(help="Extra.")] = 1
        toy_extra_two: Annotated[int, Flag(help="Extra two.")] = 2
""")

BUILTINS = "model,parallel,precision,training,checkpointing,data,logging,resilience,experimental"


class ListProject:
    """A plugin module, the helper module it imports (outside any package) and a private
    cache; ``list()`` runs ``megaplug list --json`` in a fresh process."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.code = root / "code"
        self.code.mkdir()
        self.cwd = root / "cwd"  # on sys.path under python -m: nothing may change in it
        self.cwd.mkdir()
        self.cache = root / "cache"
        self.log = root / "imports.log"
        self.log.write_text("")
        (self.code / "toyplug.py").write_text(TOY_PLUGIN)
        (self.code / "toy_helper.py").write_text(TOY_HELPER)
        backdate(self.code / "toyplug.py", self.code / "toy_helper.py", self.code)
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_NO_CACHE")}
        self.env.update(MEGAPLUG_CACHE_DIR=str(self.cache), MEGAPLUG_DISABLE=BUILTINS,
                        MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD="1", MEGAPLUG_PLUGINS="toyplug",
                        TOY_IMPORT_LOG=str(self.log), PYTHONDONTWRITEBYTECODE="1",
                        PYTHONPATH=os.pathsep.join([str(self.code),
                                                    os.environ.get("PYTHONPATH", "")]))

    def list(self, *options: str) -> dict[str, dict]:
        done = subprocess.run([sys.executable, "-m", "megaplug", "list", "--json", *options],
                              capture_output=True, text=True, env=self.env, cwd=self.cwd)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        return {row["name"]: row for row in json.loads(done.stdout)}

    def imports(self) -> int:
        """How many times a plugin module was imported (not at all when the cache answers)."""
        return len(self.log.read_text().splitlines())

    def cache_file(self) -> Path:
        """The answer written last (one is kept per key)."""
        return max(self.cache.glob("list-*.json"), key=lambda p: p.stat().st_mtime_ns)


@pytest.fixture
def project(tmp_path):
    return ListProject(tmp_path)


def test_list_is_served_from_the_cache_while_nothing_changes(project):
    assert project.list()["toyplug"]["declared_flags"] == 1
    assert project.list()["toyplug"]["declared_flags"] == 1
    assert project.imports() == 1  # the second run never imported the plugin


def test_list_follows_an_edit_of_a_module_the_plugin_imports(project):
    assert project.list()["toyplug"]["declared_flags"] == 1 and project.imports() == 1
    rewrite_keeping_mtimes(project.code / "toy_helper.py", TOY_HELPER + (
        '    toy_beta: Annotated[int, Flag(help="Beta.")] = 2\n'))
    assert project.list()["toyplug"]["declared_flags"] == 2
    assert project.imports() == 2


def test_list_follows_a_module_appearing_where_an_import_failed(project):
    assert project.list()["toyplug"]["declared_flags"] == 1
    (project.code / "toy_extra.py").write_text(TOY_EXTRA)
    assert project.list()["toyplug"]["declared_flags"] == 3


def test_list_follows_a_file_added_to_a_plugin_package(project):
    package = project.code / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        TOY_PLUGIN.replace("from toy_helper import", "from .parts import")
        .replace("name=\"toyplug\"", "name=\"toypkg\"")
        .replace("from toy_extra import", "from .extra import"))
    (package / "parts.py").write_text(TOY_HELPER)
    backdate(package / "__init__.py", package / "parts.py", package)
    project.env["MEGAPLUG_PLUGINS"] = "toypkg"
    assert project.list()["toypkg"]["declared_flags"] == 1
    assert project.list()["toypkg"]["declared_flags"] == 1
    assert project.imports() == 1
    (package / "extra.py").write_text(TOY_EXTRA)  # imported only where it exists
    assert project.list()["toypkg"]["declared_flags"] == 3


def test_list_follows_an_in_place_edit_of_entry_points_txt(project):
    site = project.root / "site"
    site.mkdir()
    (project.code / "toyplug_two.py").write_text(
        TOY_PLUGIN.replace('name="toyplug"', 'name="toyplug_two"'))
    backdate(project.code / "toyplug_two.py", project.code)
    metadata = make_distribution(site, "toy-dist", "1.0", {"toyplug": "toyplug"})
    installed = [ep.name for ep in _entry_points.entry_points()]
    project.env.update(MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD="", MEGAPLUG_PLUGINS="",
                       MEGAPLUG_DISABLE=",".join([BUILTINS, *installed]),
                       PYTHONPATH=os.pathsep.join([str(site), project.env["PYTHONPATH"]]))
    assert set(project.list()) >= {"toyplug"} and "toyplug_two" not in project.list()
    rewrite_keeping_mtimes(metadata / "entry_points.txt",
                           "[megaplug]\ntoyplug_two = toyplug_two\n")
    rows = project.list()
    assert "toyplug_two" in rows and "toyplug" not in rows
    assert rows["toyplug_two"]["distribution"] == "toy-dist"


def test_list_follows_the_selection(project):
    assert "toyplug" in project.list()
    assert project.list("-p", "no:toyplug")["toyplug"]["status"] == "blocked"
    project.env["MEGAPLUG_DISABLE"] = BUILTINS + ",toyplug"
    assert project.list()["toyplug"]["status"] == "blocked"


GOOD_ROW = {"name": "toyplug", "status": "active", "source": "module", "reason": "",
            "version": None, "distribution": None, "entry_point": None, "hooks": ["add_args"],
            "after": [], "before": [], "flags": 1, "declared_flags": 1}


@pytest.mark.parametrize("value", [
    [],
    {"rows": {"toyplug": GOOD_ROW}, "order": [], "problems": []},
    {"rows": [GOOD_ROW], "order": "toyplug", "problems": []},
    {"rows": [GOOD_ROW], "order": [], "problems": [None]},
    {"rows": [{**GOOD_ROW, "declared_flags": "many"}], "order": [], "problems": []},
    {"rows": [{**GOOD_ROW, "hooks": "add_args"}], "order": [], "problems": []},
    {"rows": [{key: v for key, v in GOOD_ROW.items() if key != "status"}], "order": [],
     "problems": []},
    {"rows": [{**GOOD_ROW, "after": None}], "order": [], "problems": []},
    {"rows": ["toyplug"], "order": [], "problems": []},
], ids=["list", "rows-object", "order-string", "problem-null", "flags-string", "hooks-string",
        "no-status", "after-null", "row-string"])
def test_a_tampered_list_cache_of_the_right_fingerprint_is_recomputed(project, value):
    first = project.list()
    path = project.cache_file()
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "value": value}))
    assert project.list() == first
    assert project.imports() == 2
    assert json.loads(path.read_text())["value"] == stored["value"]


@pytest.mark.parametrize("imports", [None, {}, [], "x", {"/nonexistent/module.py": "1/2/3"},
                                     {"/tmp/a\u0000b.py": "1/2/3"}, {"/": 7}],
                         ids=["null", "empty", "list", "string", "foreign-file", "nul-byte",
                              "int-state"])
def test_a_tampered_import_closure_is_recomputed(project, imports):
    first = project.list()
    path = project.cache_file()
    stored = json.loads(path.read_text())
    path.write_text(json.dumps({**stored, "imports": imports}))
    assert project.list() == first
    assert project.imports() == 2


def test_the_list_cache_records_the_plugins_import_closure(project):
    project.list()
    imports = json.loads(project.cache_file().read_text())["imports"]
    for name in ("toyplug.py", "toy_helper.py"):
        assert str(project.code / name) in imports
    assert str(project.code / "toy_extra.py") not in imports
    assert any(path.endswith(os.path.join("megaplug", "_kernel.py")) for path in imports)


CWD_PLUGIN = textwrap.dedent("""
    from dataclasses import make_dataclass

    from typing_extensions import Annotated

    from megaplug import Flag, PluginInfo, hookimpl

    megaplug_plugin = PluginInfo(name="cwdplug")
    CwdOptions = make_dataclass("CwdOptions", [
        (f"cwd_flag_{n}", Annotated[int, Flag(help="A flag.")], n) for n in range(FLAGS)])


    @hookimpl
    def add_args(flags):
        flags.add_options(CwdOptions)
""")


def test_a_plugin_module_found_through_the_working_directory_is_keyed_on_it(project):
    """``python -m megaplug -p NAME`` finds NAME in the working directory: another
    directory's NAME is another answer, although neither file changed."""
    answers = {}
    for place, flags in (("one", 1), ("two", 3), ("one", 1)):
        directory = project.root / place
        directory.mkdir(exist_ok=True)
        if not (directory / "cwdplug.py").exists():
            (directory / "cwdplug.py").write_text(CWD_PLUGIN.replace("FLAGS", str(flags)))
            backdate(directory / "cwdplug.py", directory)
        project.cwd = directory
        project.env["MEGAPLUG_PLUGINS"] = "cwdplug"
        answers[place] = project.list()["cwdplug"]["declared_flags"]
    assert answers == {"one": 1, "two": 3}


def test_answers_of_different_keys_are_kept_side_by_side_up_to_a_bound(cache_dir):
    for key in range(_store._KEPT_PER_KIND + 3):
        assert _store.cached("kind", f"key{key}", lambda: {"n": 1}, per_key=True) == {"n": 1}
        time.sleep(0.002)  # distinct modification times
    kept = sorted(p.name for p in cache_dir.glob("kind-*.json"))
    assert len(kept) == _store._KEPT_PER_KIND
    assert not any(name.endswith(("-key0.json", "-key1.json", "-key2.json")) for name in kept)
    assert _store.cached("kind", "key10", lambda: pytest.fail("recomputed"),
                             per_key=True) == {"n": 1}


def test_a_value_json_cannot_carry_is_returned_and_not_stored(cache_dir):
    for value in ({"x": float("nan")}, {"x": object()}):
        assert _store.cached("odd", "key", lambda v=value: v) is value
    assert not list(cache_dir.glob("odd-*"))  # neither the file nor a temporary one


# -- flags, schema, completion and docs: views of the plugins' code, cached like list ------

LAZY_PLUGIN = TOY_PLUGIN.replace("from toy_helper import ToyOptions\n", "").replace(
    "def add_args(flags):\n", "def add_args(flags):\n    from toy_helper import ToyOptions\n\n")


def edit_in_place(path: Path, text: str) -> None:
    """Rewrite a file through its open handle, mtime put back: its directory's stat (which
    the key holds where it is on sys.path or a package) does not change, only its own."""
    stat = path.stat()
    with open(path, "r+") as handle:
        handle.write(text)
        handle.truncate()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def megaplug_run(project: ListProject, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "megaplug", *args], capture_output=True,
                          text=True, env=project.env, cwd=project.cwd)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def flag_dests(project: ListProject) -> set[str]:
    return {row["dest"] for row in json.loads(megaplug_run(project, "flags", "--json"))}


def test_the_views_are_served_from_the_cache_while_nothing_changes(project):
    first = [megaplug_run(project, *command) for command in
             (("flags",), ("schema",), ("completion", "bash"))]
    imported = project.imports()
    assert [megaplug_run(project, *command) for command in
            (("flags",), ("schema",), ("completion", "bash"))] == first
    assert project.imports() == imported  # no plugin imported the second time
    assert "--toy-alpha" in first[0] and "toy_alpha" in json.loads(first[1])["properties"]


def test_answers_computed_from_a_cached_flag_table_follow_its_options_module(project):
    """A plugin imports its options module in add_args: a process that reads the flag
    table from its cache never imports it, yet what it computes from that table (list's
    counts, the flags view) must follow an edit of it."""
    package = project.code / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        LAZY_PLUGIN.replace("from toy_helper import", "from .parts import")
        .replace("name=\"toyplug\"", "name=\"toypkg\""))
    (package / "parts.py").write_text(TOY_PLUGIN.split("from megaplug")[0] + TOY_HELPER)
    backdate(package / "__init__.py", package / "parts.py", package)
    project.env["MEGAPLUG_PLUGINS"] = "toypkg"
    megaplug_run(project, "resolve", "--format", "json")  # stores the flag table
    megaplug_run(project, "resolve", "--format", "json")
    assert project.log.read_text().split() == ["toypkg", "toypkg.parts", "toypkg"]  # read back
    assert flag_dests(project) == {"toy_alpha"}  # computed from the stored table
    assert project.list()["toypkg"]["declared_flags"] == 1
    edit_in_place(package / "parts.py", (package / "parts.py").read_text() + (
        '    toy_beta: Annotated[int, Flag(help="Beta.")] = 2\n'))
    assert flag_dests(project) == {"toy_alpha", "toy_beta"}
    assert project.list()["toypkg"]["declared_flags"] == 2


def test_docs_follow_an_edit_of_a_plugin_source_never_imported(project):
    package = project.code / "toypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        TOY_PLUGIN.replace("from toy_helper import", "from .parts import")
        .replace("name=\"toyplug\"", "name=\"toypkg\""))
    (package / "parts.py").write_text(TOY_HELPER)
    # read by docs (ast) for the checks each setting is involved in, never imported
    (package / "unused.py").write_text('def check_alpha(config):\n    """Old."""\n'
                                       '    return config.toy_alpha\n')
    backdate(package / "__init__.py", package / "parts.py", package / "unused.py", package)
    project.env["MEGAPLUG_PLUGINS"] = "toypkg"
    out = project.root / "docs"
    megaplug_run(project, "docs", "--out", str(out))
    assert "`toypkg.check_alpha` (Old.)" in (out / "toypkg.md").read_text()
    imported = project.imports()
    megaplug_run(project, "docs", "--out", str(out))
    assert project.imports() == imported
    edit_in_place(package / "unused.py", (package / "unused.py").read_text()
                  .replace("Old.", "New."))
    megaplug_run(project, "docs", "--out", str(out))
    assert "`toypkg.check_alpha` (New.)" in (out / "toypkg.md").read_text()


@pytest.mark.parametrize("name", ["../escaped.md", "/tmp/escaped.md", ".hidden.md", "x.txt"])
def test_a_tampered_docs_cache_writes_nowhere_else(project, name):
    out = project.root / "docs"
    megaplug_run(project, "docs", "--out", str(out))
    cache = max(project.cache.glob("docs-*.json"), key=lambda p: p.stat().st_mtime_ns)
    stored = json.loads(cache.read_text())
    stored["value"]["value"].append([name, "tampered"])
    cache.write_text(json.dumps(stored))
    megaplug_run(project, "docs", "--out", str(out))
    assert not (project.root / "escaped.md").exists() and not Path("/tmp/escaped.md").exists()
    assert sorted(p.name for p in out.iterdir()) == ["index.md", "toyplug.md"]
