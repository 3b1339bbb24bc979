"""The data, logging and resilience flags match Megatron's measured parser facts."""

from __future__ import annotations

import argparse
import functools
import json
import os
from pathlib import Path

import pytest

from megaplug._options import specs_from_options
from megaplug.builtin.data.options import DataOptions
from megaplug.builtin.logging.options import LoggingOptions
from megaplug.builtin.resilience.options import ResilienceOptions

FACTS = Path(os.environ.get("MEGAPLUG_MEGATRON_FACTS",
                            Path(__file__).resolve().parents[3] / "shared" / "megatron"
                            / "flags.jsonl"))
PLUGINS = {"data": DataOptions, "logging": LoggingOptions, "resilience": ResilienceOptions}


@functools.lru_cache(maxsize=None)
def _load_facts() -> dict[str, dict]:
    return {f["dest"]: f for f in map(json.loads, FACTS.read_text().splitlines()) if f}


def _facts() -> dict[str, dict]:
    if not FACTS.exists():
        pytest.skip(f"no Megatron flag facts at {FACTS}")
    return _load_facts()


def _specs():
    for plugin, options in PLUGINS.items():
        for spec in specs_from_options(options, plugin):
            if spec.kind == "flag":
                yield spec


def _argparse_action(spec) -> str:
    """The name of the argparse action class that the spec's ``add_argument`` call makes."""
    strings, kwargs = spec.argparse_call()
    return type(argparse.ArgumentParser().add_argument(*strings, **kwargs)).__name__


# Seed-only flags are not in the measured parser; tests/test_megatron_inventory.py checks
# that they are declared.
MEASURED = [spec for spec in _specs() if spec.dest in _load_facts()]


@pytest.mark.parametrize("spec", MEASURED, ids=lambda s: s.dest)
def test_flag_matches_megatron(spec):
    fact = _facts()[spec.dest]
    assert spec.option_strings == tuple(fact["option_strings"])
    assert _argparse_action(spec) == fact["action"]
    assert spec.type_name == fact["type"]
    assert spec.default == fact["default"] and type(spec.default) is type(fact["default"])
    assert (list(spec.choices) if spec.choices is not None else None) == fact["choices"]
    if spec.action == "store":
        assert spec.nargs == fact["nargs"]
