"""Issue 28's measure of a plugin as a declaration: the third-party plugin that
docs/writing-a-plugin.md builds (one options class, one derivation, one check, the entry
point) is under 30 lines of source, and its tests through megaplug's pytest plugin under 20.
The page runs as written (docs/snippets.md), so these are the lines that work."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-a-plugin.md"


def _files() -> dict[str, list[str]]:
    """The page's files (blocks starting ``# file: PATH``), their lines after that marker."""
    blocks = re.findall(r"```(?:python|toml)\n# file: (\S+)\n(.*?)```", PAGE.read_text(), re.S)
    return {path: body.splitlines() for path, body in blocks}


def _source_lines(lines: list[str]) -> int:
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def _measure() -> tuple[int, int, int]:
    """(source lines, physical lines of source, physical lines of tests)."""
    files = _files()
    code = [lines for path, lines in files.items() if "/src/" in path]
    tests = [lines for path, lines in files.items() if "/tests/" in path]
    assert len(code) == 3 and len(tests) == 1, sorted(files)
    return (sum(map(_source_lines, code)), sum(map(len, code)), sum(map(len, tests)))


def test_the_documented_plugin_is_under_30_lines_and_its_tests_under_20():
    source, _, tests = _measure()
    assert source < 30 and tests < 20, (source, tests)


def test_the_page_states_its_own_size():
    source, with_blanks, tests = _measure()
    stated = re.search(r"The plugin's code is (\d+) lines \((\d+) with\s+blank lines\), its "
                       r"tests (\d+)\.", PAGE.read_text())
    assert stated is not None
    assert tuple(map(int, stated.groups())) == (source, with_blanks, tests)
