"""The installed moe distribution: discovery, and a clear error when it is blocked."""

from __future__ import annotations

import megaplug


def test_installed_plugin_is_active():
    kernel, _ = megaplug.load([])
    record = kernel.plugins.records["moe"]
    assert record.status == "active"
    assert record.distribution == "megaplug-moe"
    assert set(record.hooks) == {"add_args", "normalize", "derive", "validate"}


def test_blocked_plugin_names_itself():
    kernel, rest = megaplug.load(["-p", "no:moe", "--num-experts", "8"])
    try:
        kernel.resolve(rest, environ={"WORLD_SIZE": "1", "RANK": "0"})
    except megaplug.ConfigError as exc:
        mine = [p for p in exc.problems if "--num-experts" in p.message]
    else:
        raise AssertionError("--num-experts was accepted with the moe plugin blocked")
    assert mine and "'moe'" in mine[0].message and "blocked" in mine[0].message
