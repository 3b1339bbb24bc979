"""Flag by flag, the union of all plugins' flags equals Megatron's measured parser.

The inventory is ``../shared/megatron/flags.jsonl``. A deliberate difference goes in
``ALLOWED_DIFFERENCES`` below *and* in docs/megatron-compat.md, with its reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import megaplug
from megaplug.values._encoding import encode

SHARED = Path(__file__).resolve().parents[2] / "shared" / "megatron"
INVENTORY = [json.loads(line) for line in (SHARED / "flags.jsonl").read_text().splitlines() if line]
SEED_ONLY = [line.strip() for line in (SHARED / "seed_only_flags.txt").read_text().splitlines()
             if line.strip().startswith("--")]
#: Flags that exist only when an optional package is installed (seed: kitchen).
CONDITIONAL = {"--kitchen-config-file", "--kitchen-recipe-number"}

#: (dest, field) -> reason. Keep in step with docs/megatron-compat.md.
ALLOWED_DIFFERENCES: dict[tuple[str, str], str] = {}

_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false", "BooleanOptionalAction": "boolean_optional",
            "_StoreConstAction": "store_const", "_AppendAction": "append"}


@pytest.fixture(scope="module")
def table():
    kernel, _ = megaplug.load([])
    return kernel.table


def _by_option(table):
    return {option: spec for spec in table for option in spec.option_strings}


@pytest.mark.parametrize("fact", INVENTORY,
                         ids=[f["dest"] + ":" + f["option_strings"][0] for f in INVENTORY])
def test_flag_matches_megatron(table, fact):
    specs = _by_option(table)
    spec = specs.get(fact["option_strings"][0])
    assert spec is not None, f"{fact['option_strings'][0]} is not declared by any plugin"
    found = {
        "option_strings": [o for o in spec.option_strings],
        "dest": spec.dest,
        "action": spec.action,
        "default": encode(spec.default),
        "choices": encode(list(spec.choices)) if spec.choices is not None else None,
        "nargs": spec.nargs if spec.action in ("store", "append") else 0,
    }
    expected = {
        "option_strings": fact["option_strings"],
        "dest": fact["dest"],
        "action": _ACTIONS[fact["action"]],
        "default": fact["default"],
        "choices": fact["choices"],
        "nargs": fact["nargs"],
    }
    for field, value in expected.items():
        if (fact["dest"], field) in ALLOWED_DIFFERENCES:
            continue
        assert found[field] == value, f"{field}: megaplug {found[field]!r} != megatron {value!r}"


def test_seed_only_flags_are_declared(table):
    specs = _by_option(table)
    missing = [flag for flag in SEED_ONLY if flag not in specs and flag not in CONDITIONAL]
    assert missing == []


MEGAPLUG_PLUGINS = {"model", "parallel", "precision", "training", "checkpointing", "data",
                    "logging", "resilience", "experimental", "moe", "mla", "fsdp", "gtp",
                    "inference", "rl", "distillation", "kitchen"}


def test_no_flags_beyond_megatron(table):
    """megaplug's own plugins add no flag Megatron lacks (third-party plugins may)."""
    known = {o for f in INVENTORY for o in f["option_strings"]} | set(SEED_ONLY)
    # a seed-only BooleanOptionalAction flag brings its argparse-made --no- spelling
    known |= {"--no-" + flag[2:] for flag in SEED_ONLY}
    extra = sorted(o for o, spec in _by_option(table).items()
                   if spec.plugin in MEGAPLUG_PLUGINS and o not in known)
    allowed = {flag for (flag, field) in ALLOWED_DIFFERENCES if field == "extra"}
    assert [o for o in extra if o not in allowed] == []
