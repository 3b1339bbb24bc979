"""Plugin registration order never changes a result.

Kernels are built with the built-in plugin modules and the installed entry points in
random orders; every shared parity case (cases and mutations) must resolve to the same
values, the same provenance (every step of every setting's history), the same warnings
and — for rejected cases — the same problems as with the default order.

Budget: ``SUBSET_ORDERS`` random orders over a spread-out subset of the cases, and
``FULL_ORDERS`` random orders over all of them (counts are in ``docs/reliability.md``).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

import pytest

from reliability_support import all_cases, target_for, third_party_blocks

import megaplug
from megaplug._kernel import Kernel
from megaplug._plugins import BUILTIN_PLUGINS, PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.values._encoding import encode

SUBSET_ORDERS = 50
FULL_ORDERS = 5
SUBSET_STRIDE = 12  # every 12th case: about a dozen, spread over cases and mutations

CASES = all_cases()
SUBSET = CASES[::SUBSET_STRIDE]


def _selection() -> PluginSelection:
    selection = PluginSelection()
    selection.take_from_argv(third_party_blocks())
    return selection


def build_kernel(rng: random.Random | None, monkeypatch: pytest.MonkeyPatch) -> Kernel:
    """A kernel whose built-ins and entry points are registered in ``rng``'s order."""
    from megaplug.cache._entry_points import entry_points

    builtins = list(BUILTIN_PLUGINS)
    points = list(entry_points())
    if rng is not None:
        rng.shuffle(builtins)
        rng.shuffle(points)
    monkeypatch.setattr("megaplug._plugins._entry_points", lambda: points)
    return Kernel(PluginSet(_selection(), builtins=builtins))


def fingerprint(kernel: Kernel, case: dict[str, Any]) -> str:
    """Everything observable about one resolve, hashed."""
    environ = dict(case.get("env") or {})
    try:
        resolved = kernel.resolve(case["argv"], environ=environ, target=target_for(case),
                                  defaults=case.get("args_defaults") or {})
    except megaplug.ConfigError as exc:
        outcome: Any = {"problems": [p.to_dict() for p in exc.problems]}
    else:
        outcome = {
            "values": {k: encode(resolved[k]) for k in sorted(resolved)},
            "provenance": {
                k: [dict(step.to_dict(), value=encode(step.value))
                    for step in resolved.source(k).history()]
                for k in sorted(resolved)},
            "warnings": [str(w) for w in resolved.warnings],
            "plugins": resolved.plugins if hasattr(resolved, "plugins") else None,
        }
    text = json.dumps(outcome, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        kernel = build_kernel(None, monkeypatch)
        return {name: fingerprint(kernel, case) for name, case in CASES}


def _check_orders(orders: int, cases: list[tuple[str, dict[str, Any]]], seed: int,
                  reference: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> set[tuple]:
    rng = random.Random(seed)
    seen_orders = set()
    for _ in range(orders):
        kernel = build_kernel(rng, monkeypatch)
        seen_orders.add(tuple(kernel.plugins.records))  # registration order really varied
        differing = [name for name, case in cases if fingerprint(kernel, case) != reference[name]]
        assert not differing, (f"registration order {list(kernel.plugins.records)} changes "
                               f"the result of {differing}")
    return seen_orders


def test_fifty_orders_on_a_subset_of_cases(reference: dict[str, str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _check_orders(SUBSET_ORDERS, SUBSET, 20261202, reference, monkeypatch)
    assert len(seen) > SUBSET_ORDERS // 2
    assert len(SUBSET) >= 10


def test_every_case_in_a_few_orders(reference: dict[str, str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _check_orders(FULL_ORDERS, CASES, 7, reference, monkeypatch)
    assert len(seen) == FULL_ORDERS
    assert len(CASES) >= 150


def test_the_reference_covers_accepted_and_rejected_cases(reference: dict[str, str]) -> None:
    expectations = {case["expect"] for _name, case in CASES}
    assert expectations == {"ok", "error"}
    assert len(set(reference.values())) > len(reference) // 2  # the cases really differ
