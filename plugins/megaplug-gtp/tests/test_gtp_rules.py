"""GTP flags, the remat-size resolution and every GTP check, accepted and rejected."""

from __future__ import annotations

GTP = ("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4")


def test_defaults(resolve):
    r = resolve()
    assert r.tensor_parallel_num_weight_shards == 1 and r.gtp_weight_remat_size == 1
    assert r.expert_tensor_parallel_num_weight_shards == 1
    assert r.expert_gtp_weight_remat_size == 1
    assert r.gtp_remat_opt_in_modules == []
    assert r.gtp_remat_nccl_ub is False and r.gtp_expert_remat_nccl_ub is False


def test_shards_default_to_tensor_parallel_sizes(resolve):
    r = resolve("--tensor-model-parallel-size", "4")
    assert r.tensor_parallel_num_weight_shards == 4 and r.gtp_weight_remat_size == 1
    assert r.expert_tensor_parallel_num_weight_shards == 4
    r = resolve("--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "1")
    assert r.expert_tensor_parallel_num_weight_shards == 1


def test_remat_size_reaches_the_data_parallel_derivation(resolve):
    r = resolve(*GTP)
    assert r.gtp_weight_remat_size == 2
    assert r.data_parallel_size == 2  # 8 ranks / (tp 2 * remat 2)
    assert r.source("gtp_weight_remat_size").plugin == "gtp"


def test_expert_remat_size(resolve):
    r = resolve("--expert-tensor-parallel-size", "2",
                "--expert-tensor-parallel-num-weight-shards", "8")
    assert r.expert_gtp_weight_remat_size == 4 and r.gtp_weight_remat_size == 1


def test_explicit_zero_expert_tensor_parallel_size_is_kept(resolve, problems):
    # Megatron falls back to the dense size only for an unset size; 0 gives 0 shards
    r = resolve("--tensor-model-parallel-size", "2", "--expert-tensor-parallel-size", "0")
    assert r.expert_tensor_parallel_num_weight_shards == 0
    assert problems("--expert-tensor-parallel-size", "0",
                    "--expert-tensor-parallel-num-weight-shards", "2")


def test_shards_not_a_multiple_of_tensor_parallel_size(problems):
    messages = problems("--tensor-model-parallel-size", "4",
                        "--tensor-parallel-num-weight-shards", "6")
    assert messages == ["--tensor-parallel-num-weight-shards: 6 is not a multiple of the "
                        "tensor-parallel size 4"]
    assert problems("--expert-tensor-parallel-size", "4",
                    "--expert-tensor-parallel-num-weight-shards", "2")


def test_opt_in_modules_list(resolve):
    r = resolve("--gtp-remat-opt-in-modules", "attn", "mlp")
    assert r.gtp_remat_opt_in_modules == ["attn", "mlp"]


def test_checks_apply_only_with_remat(problems):
    assert problems("--ckpt-format", "torch_dcp", "--ddp-average-in-collective") == []


def test_checkpoint_format(problems):
    assert problems(*GTP, "--ckpt-format", "torch") == []
    assert any("--ckpt-format" in m for m in problems(*GTP, "--ckpt-format", "fsdp_dtensor"))


def test_average_in_collective(problems):
    assert any("--ddp-average-in-collective" in m
               for m in problems(*GTP, "--ddp-average-in-collective"))


def test_fp4_needs_param_gather(problems):
    assert problems(*GTP, "--fp4-format", "e2m1", "--fp4-param-gather") == []
    assert any("--fp4-param-gather" in m for m in problems(*GTP, "--fp4-format", "e2m1"))


def test_mxfp8_needs_fp8_param_buffers(problems):
    ok = (*GTP, "--fp8-recipe", "mxfp8", "--fp8-param-gather",
          "--reuse-grad-buf-for-mxfp8-param-ag")
    assert problems(*ok) == []
    assert any("--fp8-param-gather" in m for m in problems(*GTP, "--fp8-recipe", "mxfp8"))
    assert any("--reuse-grad-buf-for-mxfp8-param-ag" in m for m in problems(
        *GTP, "--fp8-recipe", "mxfp8", "--fp8-param-gather"))


def test_fully_reshardable_mem_efficient(problems):
    assert problems(*GTP, "--dist-ckpt-optim-fully-reshardable") == []
    assert problems(*GTP, "--dist-ckpt-optim-fully-reshardable",
                    "--distrib-optim-fully-reshardable-mem-efficient")


def test_nccl_ub_needs_symmetric_registration(problems):
    assert problems(*GTP, "--gtp-remat-nccl-ub") == []
    messages = problems(*GTP, "--gtp-expert-remat-nccl-ub", "--disable-symmetric-registration")
    assert any("--gtp-expert-remat-nccl-ub" in m and "--disable-symmetric-registration" in m
               for m in messages)


def test_cuda_graphs_on_blackwell_need_node_priority(problems):
    graphed = (*GTP, "--cuda-graph-impl", "local")
    assert problems(*graphed) == []  # Hopper: not required
    assert any("CUDA_GRAPHS_USE_NODE_PRIORITY" in m
               for m in problems(*graphed, capability=(10, 0)))
    assert problems(*graphed, capability=(10, 0),
                    env={"CUDA_GRAPHS_USE_NODE_PRIORITY": "1"}) == []


def test_high_priority_streams_on_blackwell(resolve):
    assert resolve(*GTP).high_priority_stream_groups == []
    assert resolve(*GTP, capability=(10, 0)).high_priority_stream_groups == ["gtp_remat"]
    r = resolve(*GTP, "--expert-tensor-parallel-num-weight-shards", "4", capability=(10, 0))
    assert r.high_priority_stream_groups == ["gtp_remat", "expt_gtp_remat"]
    assert resolve(capability=(10, 0)).high_priority_stream_groups == []


def test_nccl_proto_simple_warns(resolve):
    r = resolve(*GTP, env={"NCCL_PROTO": "Simple"})
    assert any("NCCL_PROTO" in w.message for w in r.warnings)


def test_remat_ranks_must_divide_the_data_parallel_ranks(resolve, problems):
    # 8 ranks / tp 2 = 4 data-parallel ranks; a remat size of 8 cannot group them
    assert problems("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards",
                    "16") == ["world size 8 is not divisible by the model-parallel size 16 "
                              "(TP 2 x PP 1 x CP 1 x GTP weight shards 8)"]
    resolved = resolve(*GTP)
    assert resolved.source("data_parallel_size").plugin == "gtp"
    assert resolved.source("data_parallel_size").rule == "remat_ranks_leave_data_parallelism"


def test_fp32_gradient_reduction_turns_off_fp32_accumulating_reduce_scatter(resolve):
    flag = "--gtp-remat-reduce-scatter-with-fp32-accumulation"
    resolved = resolve(*GTP, flag, "--bf16")
    assert resolved.gtp_remat_reduce_scatter_with_fp32_accumulation is False
    assert any(w.message.startswith(f"turning off {flag}") for w in resolved.warnings)
    assert resolve(*GTP, flag).gtp_remat_reduce_scatter_with_fp32_accumulation is True
