"""The installed gtp distribution: discovery, ordering, and a clear error when blocked."""

from __future__ import annotations

import megaplug


def test_installed_plugin_is_active_and_precedes_parallel():
    kernel, _ = megaplug.load([])
    record = kernel.plugins.records["gtp"]
    assert record.status == "active" and record.distribution == "megaplug-gtp"
    order = kernel.plugins.order
    if "parallel" in order:
        assert order.index("gtp") < order.index("parallel")


def test_blocked_plugin_names_itself():
    argv = ["-p", "no:gtp", "--tensor-parallel-num-weight-shards", "2"]
    kernel, rest = megaplug.load(argv)
    try:
        kernel.resolve(rest, environ={"WORLD_SIZE": "1", "RANK": "0"})
    except megaplug.ConfigError as exc:
        mine = [p for p in exc.problems if "--tensor-parallel-num-weight-shards" in p.message]
    else:
        raise AssertionError("GTP flag accepted with the gtp plugin blocked")
    assert mine and "'gtp'" in mine[0].message and "blocked" in mine[0].message
