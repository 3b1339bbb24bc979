"""The installed gtp distribution: discovery, ordering, and a clear error when blocked."""

from __future__ import annotations

import megaplug


def test_installed_plugin_is_active_and_follows_parallel_and_precision():
    kernel, _ = megaplug.load([])
    record = kernel.plugins.records["gtp"]
    assert record.status == "active" and record.distribution == "megaplug-gtp"
    order = kernel.plugins.order
    assert order.index("parallel") < order.index("gtp")
    assert order.index("precision") < order.index("gtp")


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


def test_remat_ranks_leave_the_data_parallel_size_of_the_real_parallel_plugin():
    environ = {"WORLD_SIZE": "16", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    argv = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size",
            "2", "--train-iters", "10", "--lr", "1e-4", "--tensor-model-parallel-size", "2",
            "--tensor-parallel-num-weight-shards", "4"]
    target = megaplug.TargetEnvironment(device_capability=(9, 0), environ=environ)
    resolved = megaplug.resolve(argv, environ=environ, target=target)
    # 16 ranks / (TP 2 x remat 2): 4 replicas; batches split over 16 / TP 2 = 8 ranks
    assert resolved.data_parallel_size == 4 and resolved.gtp_weight_remat_size == 2
    assert resolved.global_batch_size == 16
    assert resolved.source("data_parallel_size").previous.plugin == "parallel"
