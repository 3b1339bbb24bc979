"""The house rules issue 12 measures, checked on the source itself.

* The kernel is the modules at the top of ``src/megaplug/``; the packages below it
  (``_startup``, ``sources``, ``environment``, ``cache``, ``values``) never import the
  kernel's pipeline, the plugins or the packages that use the kernel (``cli``,
  ``megatron``); the kernel never imports those.
* A built-in plugin never names a setting a feature plugin declares: a core that knows its
  optional features' settings cannot lose them.
* No function is longer than 40 lines, in the kernel or in any plugin; the kernel itself
  is at most 2,500 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import megaplug

SOURCE = Path(megaplug.__file__).resolve().parent
REPOSITORY = SOURCE.parents[1]
PLUGIN_SOURCES = sorted(REPOSITORY.glob("plugins/*/src"))

#: The packages the kernel uses, and what none of them may import.
BELOW_THE_KERNEL = ("_startup", "sources", "environment", "cache", "values")
PIPELINE_AND_ABOVE = ("megaplug._kernel", "megaplug._plugins", "megaplug._api",
                      "megaplug.builtin", "megaplug.cli", "megaplug.megatron")


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, at module level or inside a function."""
    package = ".".join(path.relative_to(SOURCE.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in prefixes)


@pytest.mark.parametrize("package", BELOW_THE_KERNEL)
def test_the_packages_below_the_kernel_import_nothing_above_them(package):
    offending = {f"{path.relative_to(SOURCE)} imports {module}"
                 for path in sorted((SOURCE / package).glob("*.py"))
                 for module in _imported_modules(path) if _within(module, PIPELINE_AND_ABOVE)}
    assert offending == set()


def test_the_kernel_never_imports_the_packages_that_use_it():
    users = ("megaplug.builtin", "megaplug.cli", "megaplug.megatron")
    offending = {f"{path.name} imports {module}"
                 for path in sorted(SOURCE.glob("*.py")) if path.name != "__main__.py"
                 for module in _imported_modules(path) if _within(module, users)}
    assert offending == set()


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
