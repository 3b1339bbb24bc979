"""The parallel plugin: sizes, rank and world size, data-parallel size and process groups."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import ENV, messages, problems, resolve, warnings_of  # noqa: E402

import megaplug  # noqa: E402
from megaplug.builtin import parallel  # noqa: E402


# -- rank, world size and the data-parallel size -------------------------------------------


def test_rank_and_world_size_come_from_the_environment():
    resolved = resolve(env={**ENV, "RANK": "3", "WORLD_SIZE": "4"})
    assert (resolved.rank, resolved.world_size) == (3, 4)
    assert resolved.source("world_size").source == "environment"
    assert resolve(env={}).world_size == 1 and resolve(env={}).rank == 0


def test_data_parallel_size_is_world_over_model_parallel_ranks():
    resolved = resolve(["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size",
                        "2", "--num-layers", "4"], env={**ENV, "WORLD_SIZE": "16"})
    assert resolved.data_parallel_size == 4
    assert resolved.transformer_pipeline_model_parallel_size == 2
    assert resolved.source("data_parallel_size").plugin == "parallel"


def test_context_parallelism_takes_ranks_from_data_parallelism():
    resolved = resolve(["--context-parallel-size", "2", "--seq-length", "128"])
    assert resolved.data_parallel_size == 4


def test_non_integer_rank_is_reported():
    found = problems(env={**ENV, "RANK": "zero"})
    assert any("environment variable RANK='zero' is not valid" in p.message for p in found)


def test_world_size_below_one_is_a_problem():
    found = problems(env={**ENV, "WORLD_SIZE": "0"})
    assert any(p.plugin == "parallel"
               and p.message == "WORLD_SIZE is 0; a job needs at least one process"
               for p in found)


@pytest.mark.parametrize("rank, expected", [
    ("-1", "RANK is -1; ranks start at 0"),
    ("8", "RANK 8 is not below WORLD_SIZE 8"),
])
def test_odd_rank_is_accepted_like_megatron_with_a_warning(rank, expected):
    # Megatron's parse_args stores RANK as given; only process-group set-up would fail
    resolved = resolve(env={**ENV, "RANK": rank})
    assert resolved.rank == int(rank)
    assert any(expected in w.message for w in resolved.warnings)


def test_world_size_must_hold_whole_model_replicas():
    found = problems(["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "4",
                      "--num-layers", "8"])
    assert [p.message for p in found] == [
        "world size 8 is not divisible by the model-parallel size 16 (TP 4 x PP 4 x CP 1)"]
    assert found[0].hint == ("launch a multiple of 16 processes, or choose sizes whose product "
                             "divides 8: 1, 2, 4 or 8")
    assert found[0].flags == ("WORLD_SIZE", "--tensor-model-parallel-size",
                              "--pipeline-model-parallel-size", "--context-parallel-size")


@pytest.mark.parametrize("flag", ["--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                  "--context-parallel-size"])
def test_parallel_sizes_must_be_positive(flag):
    assert f"{flag} is 0; it must be at least 1" in messages([flag, "0"])


def test_negative_sizes_follow_megatrons_arithmetic():
    # Megatron's validation accepts a negative size: 8 % -2 == 0 and 8 // -2 == -4.
    resolved = resolve(["--tensor-model-parallel-size", "-2"])
    assert resolved.data_parallel_size == -4
    assert any("--tensor-model-parallel-size is -2" in w for w in warnings_of(resolved))


def test_a_negative_world_size_follows_megatrons_arithmetic_too():
    # -8 // 2 == -4 data-parallel ranks; Megatron's checks then use Python's modulo
    env = {**ENV, "WORLD_SIZE": "-8"}
    resolved = resolve(["--tensor-model-parallel-size", "2"], env=env)
    assert resolved.data_parallel_size == -4
    assert any("WORLD_SIZE is -8" in w for w in warnings_of(resolved))
    assert "WORLD_SIZE is 0; a job needs at least one process" in messages(
        [], env={**ENV, "WORLD_SIZE": "0"})


# -- context parallelism -------------------------------------------------------------------


def test_hierarchical_context_parallel_sizes_multiply_to_cp():
    argv = ["--context-parallel-size", "4", "--seq-length", "128"]
    assert resolve([*argv, "--hierarchical-context-parallel-sizes", "2", "2"]) \
        .hierarchical_context_parallel_sizes == [2, 2]
    assert ("--hierarchical-context-parallel-sizes 2 4 multiply to 8, not to the context-parallel "
            "size 4") in messages([*argv, "--hierarchical-context-parallel-sizes", "2", "4"])


def test_a2a_p2p_needs_hierarchical_sizes():
    argv = ["--context-parallel-size", "4", "--cp-comm-type", "a2a+p2p"]
    assert "--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes" in messages(argv)
    assert resolve([*argv, "--hierarchical-context-parallel-sizes", "2", "2"]).cp_comm_type == [
        "a2a+p2p"]


def test_unknown_cp_comm_type_is_reported():
    assert "--cp-comm-type p3p: unknown communication type" in messages(["--cp-comm-type", "p3p"])
    assert resolve(["--cp-comm-type", "p2p", "a2a"]).cp_comm_type == ["p2p", "a2a"]


@pytest.mark.parametrize("value, unknown", [("a2a", None), ("a2a+p2p", None), ("p3p", "p3p")])
def test_one_cp_comm_type_set_bare_by_megatron_code(value, unknown):
    # TransformerConfig takes one type for every layer as a plain string, and Megatron code
    # may set it so on the namespace: it is one type, not a list of letters
    from megaplug.megatron import ConfigError, parse_args, validate_args

    args = parse_args(argv=["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads",
                            "4", "--seq-length", "32", "--max-position-embeddings", "32",
                            "--micro-batch-size", "1", "--train-iters", "1", "--lr", "1e-4"],
                      environ=dict(ENV))
    args.cp_comm_type = value
    if value == "a2a+p2p":
        args.hierarchical_context_parallel_sizes = [1, 1]
    try:
        validate_args(args, {}, environ=dict(ENV), torch_types=False, preflight=False)
    except ConfigError as error:
        found = [p.message for p in error.problems]
    else:
        found = []
        assert args.cp_comm_type == value
    assert found == ([f"--cp-comm-type {unknown}: unknown communication type"] if unknown else [])


def test_hybrid_context_parallel_is_the_old_name_of_dynamic_cp():
    resolved = resolve(["--hybrid-context-parallel"])
    assert resolved.dynamic_context_parallel is True
    assert resolved.hybrid_context_parallel is True  # kept, as the measured Megatron keeps it
    assert resolved.sequence_packing_scheduler == "default_dynamic_cp"
    assert any("--hybrid-context-parallel is deprecated" in w for w in warnings_of(resolved))
    assert any("same option under two names" in m
               for m in messages(["--hybrid-context-parallel", "--dynamic-context-parallel"]))


def test_dynamic_cp_requirements():
    found = messages(["--dynamic-context-parallel", "--dataloader-type",
                      "cyclic", "--sequence-packing-scheduler", "dp_balanced"])
    assert "--dynamic-context-parallel needs --dataloader-type single, got cyclic" in found
    assert ("--dynamic-context-parallel needs --sequence-packing-scheduler default_dynamic_cp, "
            "got dp_balanced") in found


def test_minimum_dynamic_cp_size_must_be_a_valid_group_size():
    assert resolve(["--dynamic-context-parallel", "--min-dynamic-context-parallel-size", "4"]) \
        .min_dynamic_context_parallel_size == 4
    found = problems(["--dynamic-context-parallel", "--min-dynamic-context-parallel-size", "3"])
    assert [p.message for p in found] == [
        "--min-dynamic-context-parallel-size 3 is not a valid group size over 8 data x "
        "context-parallel ranks"]
    assert found[0].hint == "choose one of 1, 2, 4, 8"


def test_packed_sequence_buffer_must_hold_one_sequence():
    argv = ["--sequence-packing-scheduler", "dp_balanced", "--seq-length", "4096",
            "--context-parallel-size", "2"]
    found = problems([*argv, "--max-seqlen-per-dp-cp-rank", "1024"])
    assert found[0].message.startswith("packed-sequence buffer of 2 ranks x "
                                       "--max-seqlen-per-dp-cp-rank 1024 = 2048 tokens")
    assert found[0].hint == "raise --max-seqlen-per-dp-cp-rank to at least 2048"
    assert resolve([*argv, "--max-seqlen-per-dp-cp-rank", "2048"]).max_seqlen_per_dp_cp_rank == 2048


# -- retired and environment-backed flags ---------------------------------------------------


def test_model_parallel_size_is_retired_and_dropped():
    assert "model_parallel_size" not in resolve()
    found = problems(["--model-parallel-size", "2"])
    assert [(p.message, p.hint) for p in found] == [
        ("--model-parallel-size 2 is no longer supported",
         "use --tensor-model-parallel-size instead")]


def test_local_rank_defaults_to_the_launcher_variable():
    assert resolve(env={**ENV, "LOCAL_RANK": "3"}).local_rank == 3
    assert resolve(["--local-rank", "1"]).local_rank == 1
    assert resolve().local_rank == 0


# -- sequence parallelism and TP communication overlap ----------------------------------------


def test_sequence_parallel_is_turned_off_without_tensor_parallelism():
    resolved = resolve(["--sequence-parallel"])
    assert resolved.sequence_parallel is False
    assert any("turning off --sequence-parallel" in w for w in warnings_of(resolved))
    assert resolve(["--sequence-parallel", "--tensor-model-parallel-size", "2"]).sequence_parallel


def test_tp_comm_overlap_needs_sequence_parallelism():
    assert "--tp-comm-overlap needs --sequence-parallel" in messages(
        ["--tp-comm-overlap", "--tensor-model-parallel-size", "2"])
    assert any("it was turned off because --tensor-model-parallel-size is 1" in m
               for m in messages(["--tp-comm-overlap", "--sequence-parallel"]))
    assert resolve(["--tp-comm-overlap", "--sequence-parallel", "--tensor-model-parallel-size",
                    "2"]).tp_comm_overlap


def test_deterministic_mode_rules_out_tp_comm_overlap():
    argv = ["--tp-comm-overlap", "--sequence-parallel", "--tensor-model-parallel-size", "2"]
    found = problems([*argv, "--deterministic-mode"])
    assert [p.flags for p in found] == [("--deterministic-mode", "--tp-comm-overlap")]
    assert found[0].message.startswith("--deterministic-mode cannot be used with --tp-comm-overlap")
    # releases before 0.19 have no such check (their determinism set-up came with 0.19)
    older = problems([*argv, "--deterministic-mode"], packages={"megatron_core": "0.18.2"})
    assert not [p for p in older if "--tp-comm-overlap" in p.flags]


def test_cuda_device_max_connections_must_be_1_for_tp_before_blackwell():
    env = {"WORLD_SIZE": "8", "RANK": "0"}
    found = problems(["--tensor-model-parallel-size", "2"], env=env)
    assert [p.message for p in found] == [
        "tensor or context parallelism needs the environment variable "
        "CUDA_DEVICE_MAX_CONNECTIONS=1 on this GPU generation (found unset)"]
    assert resolve(["--tensor-model-parallel-size", "2"], env=env, capability=(10, 0))
    assert resolve(["--tensor-model-parallel-size", "2"],
                   env={**env, "CUDA_DEVICE_MAX_CONNECTIONS": "1"})


# -- DDP, distributed optimizer and process groups ------------------------------------------


def test_overlap_param_gather_needs_sharded_parameters_and_grad_overlap():
    found = messages(["--overlap-param-gather"])
    assert found == [
        "--overlap-param-gather needs sharded parameters: --use-distributed-optimizer "
        "or --optimizer dist_muon",
        "--overlap-param-gather needs --overlap-grad-reduce"]
    assert resolve(["--overlap-param-gather", "--overlap-grad-reduce", "--optimizer", "dist_muon"])
    assert resolve(["--overlap-param-gather", "--overlap-grad-reduce",
                    "--use-distributed-optimizer"]).overlap_param_gather


def test_overlap_param_gather_with_optimizer_step_prerequisites():
    found = messages(["--overlap-param-gather-with-optimizer-step"])
    assert found == [
        "--overlap-param-gather-with-optimizer-step needs --use-distributed-optimizer",
        "--overlap-param-gather-with-optimizer-step needs --overlap-param-gather",
        "--overlap-param-gather-with-optimizer-step needs the interleaved pipeline schedule "
        "(virtual pipeline stages)",
        "--overlap-param-gather-with-optimizer-step needs a non-distributed checkpoint format "
        "(--ckpt-format torch)"]
    ok = ["--overlap-param-gather-with-optimizer-step", "--use-distributed-optimizer",
          "--overlap-param-gather", "--overlap-grad-reduce", "--ckpt-format", "torch",
          "--pipeline-model-parallel-size", "4", "--num-layers", "8",
          "--num-virtual-stages-per-pipeline-rank", "2"]
    assert resolve(ok, env={**ENV, "WORLD_SIZE": "4"}).overlap_param_gather_with_optimizer_step


def test_distributed_optimizer_instances_are_only_warned_about_like_megatron():
    odd = resolve(["--num-distributed-optimizer-instances", "3"])
    assert odd.num_distributed_optimizer_instances == 3
    assert warnings_of(odd) == [
        "--num-distributed-optimizer-instances 3 has no effect without "
        "--use-distributed-optimizer",
        "8 data x context-parallel ranks cannot be split into "
        "--num-distributed-optimizer-instances 3 equal groups"]
    assert resolve(["--num-distributed-optimizer-instances", "2", "--use-distributed-optimizer"]) \
        .num_distributed_optimizer_instances == 2
    assert warnings_of(resolve(["--num-distributed-optimizer-instances", "0"])) == [
        "--num-distributed-optimizer-instances is 0; it should be at least 1"]


def test_without_gloo_the_distributed_optimizer_needs_distributed_checkpoints():
    argv = ["--disable-gloo-process-groups", "--use-distributed-optimizer"]
    assert resolve(argv).use_gloo_process_groups is False
    assert any("needs a distributed checkpoint format" in m
               for m in messages([*argv, "--ckpt-format", "torch"]))
    assert resolve([*argv, "--ckpt-format", "torch", "--optimizer", "muon"])


def test_mem_efficient_reshardable_optimizer_needs_gloo():
    argv = ["--dist-ckpt-optim-fully-reshardable",
            "--distrib-optim-fully-reshardable-mem-efficient"]
    assert resolve(argv)
    assert messages([*argv, "--disable-gloo-process-groups"]) == [
        "--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups"]


def test_fake_process_group_turns_off_gloo_and_the_nan_check():
    resolved = resolve(["--fake-process-group"])
    assert resolved.use_gloo_process_groups is False
    assert resolved.check_for_nan_in_loss_and_grad is False
    # the Gloo requirement is judged on what the user chose, as Megatron does
    assert resolve(["--fake-process-group", "--use-distributed-optimizer",
                    "--ckpt-format", "torch"])


def test_delay_wgrad_compute_requirements():
    assert resolve(["--delay-wgrad-compute"]).delay_wgrad_compute
    assert messages(["--delay-wgrad-compute", "--transformer-impl", "local"]) == [
        "--delay-wgrad-compute needs --transformer-impl transformer_engine"]
    old_te = {"transformer_engine": "2.6.0"}
    found = messages(["--delay-wgrad-compute", "--overlap-grad-reduce",
                      "--no-gradient-accumulation-fusion"], packages=old_te)
    assert found == [
        "--delay-wgrad-compute with --overlap-grad-reduce requires transformer_engine >= 2.8.0, "
        "found 2.6.0",
        "--delay-wgrad-compute without gradient accumulation fusion requires "
        "transformer_engine >= 2.7.0, found 2.6.0"]


def test_delay_wgrad_compute_with_cuda_graphed_attention():
    argv = ["--delay-wgrad-compute", "--overlap-grad-reduce", "--cuda-graph-modules", "attn"]
    found = messages([*argv, "--no-gradient-accumulation-fusion"],
                     packages={"transformer_engine": "2.11"})
    assert ("CUDA graphs with --delay-wgrad-compute requires transformer_engine >= 2.12.0, "
            "found 2.11" in found)
    assert any("need gradient accumulation fusion" in m for m in found)
    assert any("do not support attention biases" in m for m in found)
    assert resolve([*argv, "--disable-bias-linear"]).delay_wgrad_compute
    # Megatron asks these only while gradient reduction overlaps (its wgrad_in_graph_scope)
    without_overlap = [a for a in argv if a != "--overlap-grad-reduce"]
    assert not [m for m in messages([*without_overlap, "--no-gradient-accumulation-fusion"],
                                    packages={"transformer_engine": "2.11"})
                if "CUDA graphs" in m]


# -- flag facts -------------------------------------------------------------------------------


def test_declares_the_computed_values_megatron_adds():
    kernel, _ = megaplug.load([], environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"},
                              builtins=[parallel])
    kinds = {spec.dest: spec.kind for spec in kernel.table if spec.plugin == "parallel"}
    assert (kinds["data_parallel_size"] == kinds["virtual_pipeline_model_parallel_size"]
            == "computed")
    assert kinds["transformer_pipeline_model_parallel_size"] == "computed"
    assert kinds["rank"] == kinds["world_size"] == "env"
    assert "batch_parallel_size" not in kinds  # Megatron's namespace has no such key


def test_store_false_spellings():
    resolved = resolve(["--disable-tp-comm-bulk-wgrad", "--no-tp-comm-split-rs",
                        "--disable-gloo-process-groups", "--no-align-grad-reduce"])
    assert (resolved.tp_comm_bulk_wgrad, resolved.tp_comm_split_rs) == (False, False)
    assert (resolved.use_gloo_process_groups, resolved.align_grad_reduce) == (False, False)
