"""The installed mla distribution: discovery, and a clear error when it is blocked."""

from __future__ import annotations

import megaplug


def test_installed_plugin_is_active():
    kernel, _ = megaplug.load([])
    record = kernel.plugins.records["mla"]
    assert record.status == "active"
    assert record.distribution == "megaplug-mla"


def test_blocked_plugin_names_itself():
    kernel, rest = megaplug.load(["-p", "no:mla", "--multi-latent-attention"])
    try:
        kernel.resolve(rest, environ={"WORLD_SIZE": "1", "RANK": "0"})
    except megaplug.ConfigError as exc:
        mine = [p for p in exc.problems if "--multi-latent-attention" in p.message]
    else:
        raise AssertionError("--multi-latent-attention was accepted with mla blocked")
    assert mine and "'mla'" in mine[0].message and "blocked" in mine[0].message
