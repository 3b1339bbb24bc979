"""``megaplug._startup``: the start-up helpers agree with the standard library they stand in
for, and no other module of megaplug hand-rolls them."""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

import megaplug
from megaplug import _startup

SOURCE = Path(megaplug.__file__).resolve().parent


@pytest.fixture(autouse=True)
def _forget_test_packages():
    """Packages made in one test's directory are not found by the next through sys.modules."""
    yield
    for name in [m for m in sys.modules if m.partition(".")[0].endswith("_pkg")
                 or m.partition(".")[0].startswith("lazy_pkg_")]:
        del sys.modules[name]


@pytest.mark.parametrize("name", [
    "startup_pkg", "yaml", "json", "sys", "megaplug", "megaplug.builtin", "os.path",
    "surely_not_installed_pkg_xyz", "startup_pkg.missing"])
def test_find_spec_agrees_with_importlib(tmp_path, monkeypatch, name):
    (tmp_path / "startup_pkg").mkdir()
    (tmp_path / "startup_pkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    found, expected = _startup.find_spec(name), importlib.util.find_spec(name)
    assert (found is None) == (expected is None)
    if expected is not None:
        assert (found.name, found.origin) == (expected.name, expected.origin)


def test_find_spec_asks_a_meta_path_finder(monkeypatch):
    class EditableFinder:  # what an editable install puts on sys.meta_path
        def find_spec(self, name, path=None, target=None):
            if name == "only_via_finder":
                return importlib.machinery.ModuleSpec(name, None, origin="/x/only.py")
            return None

    monkeypatch.setattr("sys.meta_path", [EditableFinder(), *sys.meta_path])
    assert _startup.find_spec("only_via_finder").origin == "/x/only.py"
    assert importlib.util.find_spec("only_via_finder").origin == "/x/only.py"


def _package(tmp_path, monkeypatch, name: str) -> None:
    """A package ``name`` with a module ``parts`` holding ``VALUE`` and counting imports."""
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "parts.py").write_text("import builtins\nVALUE = object()\n"
                                      "builtins.IMPORTS = getattr(builtins, 'IMPORTS', 0) + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_lazy_export_is_imported_on_first_use_and_kept(tmp_path, monkeypatch):
    import builtins

    _package(tmp_path, monkeypatch, "lazy_pkg_a")
    monkeypatch.setattr(builtins, "IMPORTS", 0, raising=False)
    namespace: dict = {}
    getattr_, dir_ = _startup.lazy_exports("lazy_pkg_a", {"VALUE": ".parts"}, namespace)
    assert "lazy_pkg_a.parts" not in sys.modules and dir_() == ["VALUE"]
    value = getattr_("VALUE")
    assert value is sys.modules["lazy_pkg_a.parts"].VALUE and builtins.IMPORTS == 1
    assert namespace == {"VALUE": value}  # kept: the module __getattr__ is not asked again
    with pytest.raises(AttributeError, match="module 'lazy_pkg_a' has no attribute 'OTHER'"):
        getattr_("OTHER")


def test_a_name_outside_the_exports_goes_to_the_fallback(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "lazy_pkg_b")
    getattr_, _ = _startup.lazy_exports("lazy_pkg_b", {"VALUE": ".parts"}, {},
                                        fallback=lambda name: f"fallback {name}")
    assert getattr_("_add_x") == "fallback _add_x"


def test_megaplug_serves_its_names_through_lazy_exports():
    code = ("import sys, json, megaplug\n"
            "before = sorted(m for m in sys.modules if m.startswith('megaplug'))\n"
            "flag = megaplug.Flag\n"
            "print(json.dumps([before, 'Flag' in vars(megaplug), megaplug.Flag is flag,\n"
            "                  'Flag' in dir(megaplug)]))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, kept, same, listed = json.loads(run.stdout)
    assert before == ["megaplug", "megaplug._startup", "megaplug._version"]
    assert kept and same and listed


def test_the_megatron_facade_serves_group_adders_and_lazy_names():
    import megaplug.megatron as facade

    assert callable(facade._add_tokenizer_args)
    assert facade.moe_freq_type is vars(facade)["moe_freq_type"]
    with pytest.raises(AttributeError, match="has no attribute '_add_no_such_args'"):
        facade._add_no_such_args  # noqa: B018


def test_the_version_is_read_beside_the_package(tmp_path, monkeypatch):
    (tmp_path / "versioned_pkg").mkdir()
    (tmp_path / "versioned_pkg" / "__init__.py").write_text("")
    (tmp_path / "Versioned.Pkg-3.4.5.dist-info").mkdir()
    (tmp_path / "other-1.0.dist-info").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = _startup.find_spec("versioned_pkg")
    assert _startup.version_beside(spec, ("versioned-pkg",)) == "3.4.5"
    assert _startup.version_beside(spec, ("unrelated",)) is None
    assert _startup.version_in(str(tmp_path), ("Other",)) == "1.0"
    assert _startup.version_in(str(tmp_path / "absent"), ("other",)) is None
    assert _startup.normalized_name("Fancy.Pkg") == _startup.normalized_name("fancy-pkg")


#: Where a trick is still written out by hand, and why it may stay there: nowhere.
HAND_ROLLED_ELSEWHERE: dict[tuple[str, str], str] = {}


def _hand_rolled(path: Path) -> set[str]:
    """The start-up tricks ``path`` writes out itself: a module-level ``__getattr__``, a walk
    over ``sys.meta_path``, an import of ``importlib.util`` / ``importlib.metadata``."""
    found = set()
    tree = ast.parse(path.read_text())
    found.update("module __getattr__" for node in tree.body
                 if isinstance(node, ast.FunctionDef) and node.name == "__getattr__")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "meta_path":
            found.add("sys.meta_path")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("importlib."))
        elif isinstance(node, ast.ImportFrom) and node.module == "importlib":
            found.update(f"importlib.{a.name}" for a in node.names if a.name in ("util", "metadata"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("importlib."):
            found.add(node.module)
    return found - {"importlib.machinery"}


def test_the_start_up_tricks_live_in_megaplug_startup():
    written = {(str(path.relative_to(SOURCE)), trick)
               for path in sorted(SOURCE.rglob("*.py")) if "_startup" not in path.parts
               for trick in _hand_rolled(path)}
    assert written == set(HAND_ROLLED_ELSEWHERE)


def test_the_check_sees_a_hand_rolled_trick(tmp_path):
    (tmp_path / "m.py").write_text("import sys\nfrom importlib import metadata\n"
                                   "def __getattr__(name):\n    return sys.meta_path\n")
    assert _hand_rolled(tmp_path / "m.py") == {"module __getattr__", "sys.meta_path",
                                              "importlib.metadata"}
