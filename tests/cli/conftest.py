"""Fixtures of the command-line tests: the toy plugin set, or every installed plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "kernel"))  # the toy plugins

BUILTINS = "model,parallel,precision,training,checkpointing,data,logging,resilience,experimental"


@pytest.fixture
def toy_env(monkeypatch, tmp_path):
    """Only the toy core plugin: built-ins blocked, entry points off, a private cache."""
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MEGAPLUG_DISABLE", BUILTINS)
    monkeypatch.setenv("MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("MEGAPLUG_PLUGINS", "toy_module_plugin")
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """Every installed plugin, and no plugin or rank variables from the caller's shell."""
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("RANK", "WORLD_SIZE", "MEGAPLUG_DISABLE", "MEGAPLUG_PLUGINS",
                 "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
