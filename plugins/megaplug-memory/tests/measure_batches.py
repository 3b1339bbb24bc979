"""The measuring script's batches (scripts/measure_corpus.py), imported without a GPU."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "measure_corpus.py"


def script():
    """The measuring script as a module (it imports torch only inside its functions)."""
    spec = importlib.util.spec_from_file_location("measure_corpus", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def batches() -> dict:
    return script().BATCHES


def unseen_names() -> set[str]:
    """Points measured after the constants were fitted (batches C-F), but re-measurements
    of a fitted point (batch D repeats one of batch A)."""
    every = batches()
    fitted = {config["name"] for config in every["A"]}
    return {config["name"] for batch in "CDEF" for config in every[batch]} - fitted
