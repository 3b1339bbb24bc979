"""The generated flag reference: one Markdown page per plugin (``megaplug docs``).

"Checks" are found by reading each plugin's source with ``ast``: every function that
reads a setting (``config.x``, ``config.get("x")``, ``"x"`` in a flags tuple) is listed
under that setting with the first line of its docstring. Nothing is imported or run.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

from ..values._encoding import encode

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _source_files(module: Any) -> list[Path]:
    path = getattr(module, "__file__", None)
    if not path:
        import inspect

        try:
            path = inspect.getsourcefile(type(module))
        except TypeError:
            return []
        if not path:
            return []
    file = Path(path)
    if file.name == "__init__.py":
        return sorted(p for p in file.parent.rglob("*.py") if "tests" not in p.parts)
    return [file]


def _functions_by_setting(module: Any, dests: set[str]) -> dict[str, list[tuple[str, str]]]:
    from ..cache._store import depends_on

    found: dict[str, list[tuple[str, str]]] = {}
    files = _source_files(module)
    depends_on([*files, *{file.parent for file in files}])  # modules never imported, too
    for file in files:
        for name, summary, names in _functions_of(file):
            for dest in names & dests:
                entry = (name, summary)
                bucket = found.setdefault(dest, [])
                if entry not in bucket:
                    bucket.append(entry)
    return found


@functools.lru_cache(maxsize=None)
def _functions_of(file: Path) -> tuple[tuple[str, str, frozenset[str]], ...]:
    """(name, docstring summary, every attribute and string constant it mentions) for each
    function in ``file``: parsed once per process, however many pages read it."""
    import ast  # only where the reference is written, not read from the cache

    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return ()
    functions = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name in ("add_args",) or node.name.startswith("_parse"):
            continue
        doc = (ast.get_docstring(node) or "").strip().splitlines()
        mentioned = set()
        for inner in ast.walk(node):
            if isinstance(inner, ast.Attribute):
                mentioned.add(inner.attr)
            elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                mentioned.add(inner.value)
        functions.append((node.name, doc[0] if doc else "", frozenset(mentioned)))
    return tuple(functions)


def _checks_by_setting(kernel: Any) -> dict[str, list[tuple[str, str]]]:
    """Every active plugin's functions that read each setting, as "plugin.function"."""
    dests = {s.dest for s in kernel.table}
    checks: dict[str, list[tuple[str, str]]] = {}
    for name in kernel.plugins.order:
        module = kernel.plugins.records[name].module
        owner = getattr(module, "megaplug_plugin", None)
        prefix = f"{owner.name}." if owner is not None else ""
        for dest, functions in _functions_by_setting(module, dests).items():
            checks.setdefault(dest, []).extend((prefix + f, s) for f, s in functions)
    return checks


def _cell(value: Any) -> str:
    text = json.dumps(encode(value)) if not isinstance(value, str) else f"`{value}`"
    return text.replace("|", "\\|")


def render_plugin(kernel: Any, name: str,
                  checks: dict[str, list[tuple[str, str]]] | None = None) -> str:
    """The Markdown reference page of one plugin (active, or unavailable: then the flags it
    would add)."""
    record = kernel.plugins.records[name]
    if record.status == "active":
        specs = [s for s in kernel.table if s.plugin == name]
    else:
        specs = list(kernel.inactive_specs.get(name, ()))
    if checks is None:
        checks = _checks_by_setting(kernel)
    lines = [f"# Plugin `{name}`", ""]
    if record.info and record.info.description:
        lines += [record.info.description, ""]
    if record.status != "active":
        lines += [f"**{record.status}** here: {record.reason}. These are the flags it adds "
                  "where it is available.", ""]
    lines += [
        f"- distribution: {record.distribution or record.source}",
        f"- runs after: {', '.join(record.after) or '-'}; "
        f"before: {', '.join(record.before) or '-'}",
        f"- hooks: {', '.join(record.hooks) or '-'}",
        "",
        "| setting | flags | type | default | choices | notes |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_table_row(spec) for spec in specs]
    involved = [(s.dest, checks.get(s.dest, [])) for s in specs]
    involved = [(d, c) for d, c in dict(involved).items() if c]
    if involved:
        lines += ["", "## Checks and derivations involving each setting", ""]
        for dest, functions in involved:
            described = "; ".join(f"`{f}`" + (f" ({s})" if s else "") for f, s in functions[:12])
            lines.append(f"- `{dest}`: {described}")
    return "\n".join(lines) + "\n"


def _table_row(spec: Any) -> str:
    """One setting's row of a plugin page's table."""
    flags = ", ".join(f"`{o}`" for o in spec.option_strings) or (
        f"env `{spec.env}`" if spec.env else "computed")
    type_name = spec.type_name or ("bool" if spec.action in (
        "store_true", "store_false", "boolean_optional") else "-")
    if spec.nargs is not None:
        type_name += f" (nargs {spec.nargs})"
    choices = ", ".join(str(encode(c)) for c in spec.choices) if spec.choices else "-"
    notes = []
    if spec.help:
        notes.append(spec.help)
    if spec.deprecated:
        notes.append(f"deprecated: {spec.deprecated}")
    if spec.hidden:
        notes.append("hidden from --help")
    return (f"| `{spec.dest}` | {flags} | {type_name} | {_cell(spec.default)} | "
            f"{choices.replace('|', '/')} | {' '.join(notes).replace('|', '/')} |")


def write_reference(kernel: Any, out: str | os.PathLike[str],
                    command: str = "megaplug docs --out docs/flags") -> list[Path]:
    """Write ``index.md`` and one page per active or unavailable plugin into ``out``;
    returns the paths. Blocked and broken plugins are left out of the reference; the index
    names ``command`` as what generated it. Raises
    :class:`~megaplug.cli._parser.UsageError` where ``out`` cannot hold them."""
    return write_pages(os.fspath(out), reference_pages(kernel, command))


def write_pages(out: str, pages: dict[str, str]) -> list[Path]:
    """Write ``pages`` (file name -> text) into the directory ``out``, made if missing;
    returns the paths. Raises :class:`~megaplug.cli._parser.UsageError` naming ``out``
    where it cannot be: empty, an existing file, under a file, unwritable."""
    from ._parser import UsageError

    if not out:
        raise UsageError("megaplug docs: --out needs a directory (it was empty)")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"megaplug docs: --out {out!r} is a file, not a directory "
                         "(name a directory; it is made if missing)")
    directory, written = Path(out), []
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, text in pages.items():
            path = directory / name
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except NotADirectoryError:
        raise UsageError(f"megaplug docs: --out {out!r} is under a file, not a directory"
                         ) from None
    except (OSError, ValueError) as error:  # read-only, no permission, a NUL in the name
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"megaplug docs: cannot write the reference to {out!r}: {reason}"
                         ) from None
    return written


def reference_pages(kernel: Any, command: str = "megaplug docs --out docs/flags",
                    ) -> dict[str, str]:
    """The reference's pages by file name: one per active or unavailable plugin (in name
    order), then ``index.md``, which names ``command`` as what generated it (and so
    regenerates it)."""
    checks = _checks_by_setting(kernel)
    pages = {}
    index = ["# Flag reference", "", f"Generated by `{command}`; do not edit.",
             "", "| plugin | status | flags |", "|---|---|---|"]
    for name in sorted(kernel.plugins.records):
        record = kernel.plugins.records[name]
        if record.status not in ("active", "unavailable"):
            continue
        specs = (kernel.table.plugin_specs(name) if record.status == "active"
                 else kernel.inactive_specs.get(name, []))
        count = sum(1 for s in specs if s.kind == "flag")
        index.append(f"| [{name}]({name}.md) | {record.status} | {count} |")
        pages[f"{name}.md"] = render_plugin(kernel, name, checks)
    pages["index.md"] = "\n".join(index) + "\n"
    return pages
