"""The house rules issue 12 measures, checked on the source itself.

* The kernel is the modules at the top of ``src/megaplug/``. The packages below it are
  layered, lowest first: ``_startup`` (nothing of megaplug), ``values``, ``sources``,
  ``cache``, ``environment``; each imports only the packages before it in that order, and of
  the kernel only its values -- ``_record``, ``_errors``, ``_options`` and ``_version``
  (records, problems, flag specs) -- and, for the cache, which stores and reads the flag
  table, ``_registry``: never the pipeline (``_kernel``, ``_config``, ``_plugins``,
  ``_api``, ``_rules``, ``hookspecs``), a plugin or a package that uses the kernel (``cli``,
  ``megatron``, ``builtin``, ``testing``); the kernel never imports those. One import goes
  up today, named in :data:`KNOWN_UPWARD` with its reason; any other fails.
* A flag table is a value: only ``_registry.py`` (its one builder, ``declare``, and the
  table's own methods) writes a table's indexes; only ``_config.py`` touches ``Draft``'s
  private state.
* A built-in plugin never names a setting a feature plugin declares: a core that knows its
  optional features' settings cannot lose them.
* No function is longer than 40 lines, in the kernel or in any plugin; the kernel itself
  is at most 2,500 lines.

Each check has a test that it can fail, on a small tree of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import megaplug

SOURCE = Path(megaplug.__file__).resolve().parent
REPOSITORY = SOURCE.parents[1]
PLUGIN_SOURCES = sorted(REPOSITORY.glob("plugins/*/src"))

#: The packages the kernel uses, lowest first: each imports only those before it.
BELOW_THE_KERNEL = ("_startup", "values", "sources", "cache", "environment")
#: The kernel's modules a package below it may import: the kernel's values.
KERNEL_VALUES = ("_record", "_errors", "_options", "_version")
#: ... and what one package needs beyond them: the cache stores and reads the flag table.
ALSO_ALLOWED = {"cache": ("_registry",)}
#: The imports that go up today, each with its reason (``path``, module imported).
KNOWN_UPWARD = {
    # reading a config file in another program's format asks the installed format readers,
    # which the cache's entry-point reader finds (a function-level import, on that path only)
    ("sources/_config_files.py", "megaplug.cache._entry_points"),
}


def _imported_modules(path: Path, source: Path = SOURCE, names: bool = True) -> set[str]:
    """Every module ``path`` imports, absolute, at module level or inside a function (with
    ``names``, also each ``from X import name`` as ``X.name``, which may be a module)."""
    package = ".".join(path.relative_to(source.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            if node.module:  # (``from .. import _startup`` imports the module, not the package)
                found.add(base)
            if names or not node.module:
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


def _layering_offences(source: Path = SOURCE) -> set[str]:
    """Each import of a package below the kernel (under ``source``, a ``megaplug`` tree)
    that breaks the layering the module docstring states."""
    offending = set()
    for place, package in enumerate(BELOW_THE_KERNEL):
        allowed = tuple(f"megaplug.{name}" for name in (
            *BELOW_THE_KERNEL[:place + 1], *KERNEL_VALUES, *ALSO_ALLOWED.get(package, ())))
        for path in sorted((source / package).rglob("*.py")):
            where = path.relative_to(source).as_posix()
            offending |= {f"{where} imports {module}"
                          for module in _imported_modules(path, source, names=False)
                          if (_within(module, ("megaplug",)) or module.startswith("megaplug_"))
                          and not _within(module, allowed) and not any(
                              where == known_path and _within(module, (known,))
                              for known_path, known in KNOWN_UPWARD)}
    return offending


def test_the_packages_below_the_kernel_import_only_downward():
    assert _layering_offences() == set()


def test_the_layering_check_sees_an_import_up_or_into_the_pipeline(tmp_path):
    tree = tmp_path / "megaplug"
    for package, text in (("values", "from ..cache._store import cached\nfrom .._kernel "
                                     "import Kernel\nfrom .._record import Record\n"),
                          ("cache", "from ..values._encoding import fresh\n"
                                    "def later():\n    from ..environment import narrow\n"),
                          ("environment", "from .. import _registry\nimport megaplug_moe\n"
                                          "import megaplug\n")):
        (tree / package).mkdir(parents=True)
        (tree / package / "bad.py").write_text(text)
    assert _layering_offences(tree) == {
        "values/bad.py imports megaplug.cache._store",
        "values/bad.py imports megaplug._kernel",
        "cache/bad.py imports megaplug.environment",
        "environment/bad.py imports megaplug._registry",
        "environment/bad.py imports megaplug_moe", "environment/bad.py imports megaplug"}


def test_the_kernel_never_imports_the_packages_that_use_it():
    users = ("megaplug.builtin", "megaplug.cli", "megaplug.megatron")
    offending = {f"{path.name} imports {module}"
                 for path in sorted(SOURCE.glob("*.py")) if path.name != "__main__.py"
                 for module in _imported_modules(path) if _within(module, users)}
    assert offending == set()


#: A flag table's indexes: written only by ``_registry.py`` (its builder and own methods).
TABLE_INDEXES = frozenset(("specs", "by_dest", "by_option", "by_env", "options_classes",
                           "mutex_groups", "release_data", "withheld", "elsewhere", "renamed"))
#: The methods that change a list or dict in place.
MUTATORS = frozenset(("append", "extend", "insert", "update", "setdefault", "pop", "popitem",
                      "clear", "remove", "sort", "reverse", "__setitem__", "__delitem__"))


def _on_another(node: ast.AST, names: frozenset[str]) -> bool:
    """Whether ``node`` (or what it indexes) is one of ``names`` of something other than
    ``self`` (a class's own attribute of the same name is its own business)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Attribute) and node.attr in names
            and not (isinstance(node.value, ast.Name) and node.value.id == "self"))


def _targets(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.Tuple, ast.List)):
        return [target for element in node.elts for target in _targets(element)]
    return _targets(node.value) if isinstance(node, ast.Starred) else [node]


def _written(node: ast.AST) -> list[ast.AST]:
    """What an assignment or a deletion writes (nothing, for any other node)."""
    if isinstance(node, (ast.Assign, ast.Delete)):
        return [target for each in node.targets for target in _targets(each)]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return _targets(node.target)
    return []


def _changes_in_place(node: ast.AST, names: frozenset[str]) -> bool:
    """Whether ``node`` calls a mutator on one of ``names``, or sets one by ``setattr``."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        return _on_another(node.func.value, names)
    return ast.unparse(node.func) in ("setattr", "delattr", "object.__setattr__") and any(
        isinstance(arg, ast.Constant) and arg.value in names for arg in node.args[1:2])


def _nodes(roots: list[Path], allowed: tuple[Path, ...]):
    """Every syntax node of the Python files under ``roots``, but the ``allowed`` files'."""
    for path in (path for root in roots for path in sorted(root.rglob("*.py"))):
        if path not in allowed:
            for node in ast.walk(ast.parse(path.read_text())):
                yield path, node


def _index_writes(roots: list[Path], allowed: tuple[Path, ...]) -> list[str]:
    """Each assignment, deletion, in-place change or ``setattr`` of a table's index outside
    the ``allowed`` files."""
    return [f"{path}:{node.lineno} {ast.unparse(node).splitlines()[0]}"
            for path, node in _nodes(roots, allowed)
            if any(_on_another(target, TABLE_INDEXES) for target in _written(node))
            or _changes_in_place(node, TABLE_INDEXES)]


def test_only_the_registry_writes_a_tables_indexes():
    assert _index_writes([SOURCE, *PLUGIN_SOURCES], (SOURCE / "_registry.py",)) == []


def test_the_index_check_sees_every_kind_of_write(tmp_path):
    (tmp_path / "writes.py").write_text(
        "table.by_option['--x'] = spec\n"
        "kernel.table.release_data = {}\n"
        "del table.by_dest['x']\n"
        "table.mutex_groups.append([])\n"
        "table.by_dest.setdefault('x', []).append(spec)\n"
        "table.by_dest['x'].append(spec)\n"
        "setattr(table, 'elsewhere', {})\n"
        "self.renamed = {}\n"  # a class's own attribute
        "found = table.by_option.get('--x')\n")  # a read
    (tmp_path / "allowed.py").write_text("table.by_option['--x'] = spec\n")
    assert sorted(line.split(" ", 1)[1] for line in _index_writes(
        [tmp_path], (tmp_path / "allowed.py",))) == sorted([
            "table.by_option['--x'] = spec", "kernel.table.release_data = {}",
            "del table.by_dest['x']", "table.mutex_groups.append([])",
            "table.by_dest.setdefault('x', [])", "table.by_dest['x'].append(spec)",
            "setattr(table, 'elsewhere', {})"])


def _draft_private_uses(roots: list[Path], allowed: tuple[Path, ...]) -> list[str]:
    """Each use of ``Draft``'s private state (an attribute of another object, or its name
    as text, for ``setattr`` and friends) outside the ``allowed`` files."""
    from megaplug import Draft

    private = frozenset(name for name in Draft.__slots__ if name.startswith("_"))
    return [f"{path.name}:{node.lineno} {ast.unparse(node)}"
            for path, node in _nodes(roots, allowed)
            if (isinstance(node, ast.Attribute) and _on_another(node, private))
            or (isinstance(node, ast.Constant) and node.value in private)]


def test_only_the_config_module_touches_a_drafts_private_state():
    assert _draft_private_uses([SOURCE, *PLUGIN_SOURCES], (SOURCE / "_config.py",)) == []


def test_the_private_state_check_sees_a_read_a_write_and_a_name(tmp_path):
    (tmp_path / "peeks.py").write_text(
        "values = view._values\n"
        "draft._provenance['x'] = record\n"
        "object.__setattr__(view, '_values', log)\n"
        "self._values = {}\n")  # a class's own attribute
    assert sorted(_draft_private_uses([tmp_path], ())) == [
        "peeks.py:1 view._values", "peeks.py:2 draft._provenance", "peeks.py:3 '_values'"]


def _feature_settings() -> dict[str, str]:
    """Each dest and option string a plugin under plugins/ declares, with its plugin."""
    from megaplug._plugins import BUILTIN_PLUGINS

    builtins = {name.rsplit(".", 1)[-1] for name in BUILTIN_PLUGINS}
    kernel, _rest = megaplug.load()
    owned = {}
    for spec in kernel.table:
        if spec.plugin not in builtins:
            owned.update(dict.fromkeys((spec.dest, *spec.option_strings), spec.plugin))
    return owned


def test_no_builtin_names_a_setting_of_a_feature_plugin():
    owned = _feature_settings()
    # the check means something only with the feature plugins installed (as CI installs them)
    assert {"moe", "mla", "fsdp", "gtp", "inference", "rl", "distillation"} <= set(owned.values())
    named = []
    for path in sorted((SOURCE / "builtin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            word = (node.value if isinstance(node, ast.Constant) and isinstance(node.value, str)
                    else node.attr if isinstance(node, ast.Attribute)
                    else node.id if isinstance(node, ast.Name)
                    else node.arg if isinstance(node, ast.keyword) else None)
            if word in owned:
                named.append(f"{path.relative_to(SOURCE)}:{node.lineno} names {word!r} "
                             f"of plugin {owned[word]!r}")
    assert named == []


def test_the_check_finds_a_feature_setting_where_one_is_named():
    owned = _feature_settings()
    assert owned["num_experts"] == "moe" and owned["--num-experts"] == "moe"


def _long_functions(roots: list[Path], limit: int = 40) -> list[str]:
    found = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if length > limit:
                        found.append(f"{path}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_is_longer_than_40_lines():
    assert PLUGIN_SOURCES, "the plugins' sources are beside the package"
    assert _long_functions([SOURCE, *PLUGIN_SOURCES]) == []


def test_the_length_check_sees_a_long_function(tmp_path):
    body = "".join(f"    x{line} = {line}\n" for line in range(40))
    (tmp_path / "long.py").write_text(f"def long():\n{body}")
    assert _long_functions([tmp_path]) == [f"{tmp_path / 'long.py'}:1 long (41 lines)"]


def test_the_kernel_stays_within_its_line_budget():
    """Issue 12's measure: the top-level modules (the kernel a newcomer reads) hold at most
    2,500 lines; what the kernel only uses lives in the packages below it."""
    lines = sum(len(path.read_text().splitlines()) for path in SOURCE.glob("*.py"))
    assert lines <= 2500, f"the kernel is {lines} lines"
