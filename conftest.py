"""The documentation's fenced blocks are tests: README.md, docs/, examples/ and plugins/ pages.

The convention is docs/snippets.md; the harness is tests/docs/snippets.py (loaded by path:
the tests folder is not a package, and pytest runs with --import-mode=importlib).
"""

import importlib.util
import sys
from pathlib import Path

_NAME = "megaplug_docs_snippets"
if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parent / "tests" / "docs" / "snippets.py")
    sys.modules[_NAME] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_NAME])

pytest_collect_file = sys.modules[_NAME].DOCS.pytest()

