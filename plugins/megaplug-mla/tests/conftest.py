"""The mla plugin alone, with a stand-in for the experimental plugin's settings it reads:
megaplug's pytest plugin (``resolve``, ``problems``) resolves with this set."""

from __future__ import annotations

import pytest

import megaplug_mla
from megaplug.testing import stand_in

EXPERIMENTAL = stand_in(
    "experimental",
    ("--hybrid-layer-pattern", {"type": str, "default": None}),
    ("--group-query-attention", {"action": "store_true"}),
    ("--mtp-num-layers", {"type": int, "default": None}),
    ("--mtp-hybrid-override-pattern", {"type": str, "default": None}))


@pytest.fixture
def megaplug_plugins() -> list[object]:
    return [EXPERIMENTAL, megaplug_mla]


@pytest.fixture
def megaplug_reporter() -> str:
    return "mla"
