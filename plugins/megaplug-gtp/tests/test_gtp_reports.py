"""What each GTP rule reports, whole: the message, every flag it names and the hint; every
warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

from typing import Any

from dataclasses import dataclass

import pytest
from typing_extensions import Annotated

import megaplug
import megaplug_gtp
from megaplug import Computed, FromEnv, PluginInfo, hookimpl

GTP = ("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4")
NAMED = "GTP (--tensor-parallel-num-weight-shards / --expert-tensor-parallel-num-weight-shards)"
EXPERT = ("--expert-tensor-parallel-size", "2", "--expert-tensor-parallel-num-weight-shards", "8")
BLACKWELL = (10, 0)


@pytest.fixture
def reported(resolve):
    def run(*argv: str, **kwargs: Any) -> list[tuple]:
        with pytest.raises(megaplug.ConfigError) as info:
            resolve(*argv, **kwargs)
        return [(p.message, tuple(p.flags), p.hint) for p in info.value.problems]

    return run


def warned(resolved: megaplug.Resolved) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings]


def provenance(resolved: megaplug.Resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, kwargs, expected", [
    (("--tensor-parallel-num-weight-shards", "0"), {},
     ("--tensor-parallel-num-weight-shards: must be at least 1, got 0",
      ("--tensor-parallel-num-weight-shards", "--tensor-model-parallel-size"),
      "use a multiple of the tensor-parallel size 1: 1, 2, 3, ...")),
    (("--tensor-model-parallel-size", "4", "--tensor-parallel-num-weight-shards", "6"), {},
     ("--tensor-parallel-num-weight-shards: 6 is not a multiple of the tensor-parallel size 4",
      ("--tensor-parallel-num-weight-shards", "--tensor-model-parallel-size"),
      "use one of 4, 8, 12, ..., or leave it unset for no GTP")),
    (("--expert-tensor-parallel-size", "4", "--expert-tensor-parallel-num-weight-shards", "6"),
     {}, ("--expert-tensor-parallel-num-weight-shards: 6 is not a multiple of the "
          "tensor-parallel size 4 (expert tensor-parallel size)",
          ("--expert-tensor-parallel-num-weight-shards", "--expert-tensor-parallel-size"),
          "use one of 4, 8, 12, ..., or leave it unset for no GTP")),
    (("--expert-tensor-parallel-size", "-2", "--expert-tensor-parallel-num-weight-shards", "2"),
     {}, ("--expert-tensor-parallel-num-weight-shards: cannot split over a tensor-parallel size "
          "of -2 (expert tensor-parallel size)",
          ("--expert-tensor-parallel-num-weight-shards", "--expert-tensor-parallel-size"),
          "use a tensor-parallel size of at least 1")),
    (GTP, {"env": {"WORLD_SIZE": "6"}},
     ("world size 6 is not divisible by the model-parallel size 4 (TP 2 x PP 1 x CP 1 x GTP "
      "weight shards 2)",
      ("WORLD_SIZE", "--tensor-model-parallel-size", "pipeline_model_parallel_size",
       "--context-parallel-size", "--tensor-parallel-num-weight-shards"),
      "launch a multiple of 4 processes, or use a remat size that divides the 3 data-parallel "
      "ranks")),
    ((*GTP, "--fp4-format", "e2m1"), {},
     (f"{NAMED} with --fp4-format needs --fp4-param-gather", ("--fp4-format", "--fp4-param-gather"),
      "add --fp4-param-gather")),
    ((*GTP, "--cuda-graph-impl", "local"), {"capability": BLACKWELL},
     (f"{NAMED} with --cuda-graph-impl local on Blackwell or newer needs "
      "CUDA_GRAPHS_USE_NODE_PRIORITY=1", ("--cuda-graph-impl",),
      "export CUDA_GRAPHS_USE_NODE_PRIORITY=1")),
    ((*GTP, "--ddp-average-in-collective"), {},
     (f"{NAMED} does not work with --ddp-average-in-collective", ("--ddp-average-in-collective",),
      "drop --ddp-average-in-collective")),
    ((*GTP, "--ckpt-format", "fsdp_dtensor"), {},
     (f"{NAMED} supports --ckpt-format torch or torch_dist, not 'fsdp_dtensor'",
      ("--ckpt-format",), "use --ckpt-format torch_dist")),
    ((*GTP, "--dist-ckpt-optim-fully-reshardable",
      "--distrib-optim-fully-reshardable-mem-efficient"), {},
     (f"{NAMED} does not support --dist-ckpt-optim-fully-reshardable together with "
      "--distrib-optim-fully-reshardable-mem-efficient",
      ("--dist-ckpt-optim-fully-reshardable", "--distrib-optim-fully-reshardable-mem-efficient"),
      "drop --distrib-optim-fully-reshardable-mem-efficient")),
    ((*GTP, "--fp8-recipe", "mxfp8"), {},
     (f"{NAMED} with --fp8-recipe mxfp8 needs --fp8-param-gather",
      ("--fp8-recipe", "--fp8-param-gather"), "add --fp8-param-gather")),
    ((*GTP, "--fp8-recipe", "mxfp8", "--fp8-param-gather"), {},
     (f"{NAMED} with --fp8-recipe mxfp8 and --fp8-param-gather needs "
      "--reuse-grad-buf-for-mxfp8-param-ag",
      ("--fp8-param-gather", "--reuse-grad-buf-for-mxfp8-param-ag"),
      "add --reuse-grad-buf-for-mxfp8-param-ag")),
    ((*GTP, "--gtp-remat-nccl-ub", "--disable-symmetric-registration"), {},
     ("--gtp-remat-nccl-ub needs symmetric registration, but --disable-symmetric-registration "
      "is set", ("--gtp-remat-nccl-ub", "--disable-symmetric-registration"),
      "drop --disable-symmetric-registration or --gtp-remat-nccl-ub")),
    ((*GTP, "--gtp-remat-nccl-ub", "--gtp-expert-remat-nccl-ub",
      "--disable-symmetric-registration"), {},
     ("--gtp-remat-nccl-ub / --gtp-expert-remat-nccl-ub needs symmetric registration, but "
      "--disable-symmetric-registration is set",
      ("--gtp-remat-nccl-ub", "--gtp-expert-remat-nccl-ub", "--disable-symmetric-registration"),
      "drop --disable-symmetric-registration or --gtp-remat-nccl-ub / "
      "--gtp-expert-remat-nccl-ub")),
])
def test_each_problem_whole(reported, argv, kwargs, expected):
    assert reported(*argv, **kwargs) == [expected]


@pytest.mark.parametrize("argv, kwargs", [
    ((*GTP, "--fp4-format", "e2m1", "--fp4-param-gather"), {}),
    ((*GTP, "--cuda-graph-impl", "local"), {}),
    ((*GTP, "--cuda-graph-impl", "local"),
     {"capability": BLACKWELL, "env": {"CUDA_GRAPHS_USE_NODE_PRIORITY": "1"}}),
    ((*GTP, "--cuda-graph-impl", "local"), {"capability": None}),
    ((*GTP,), {"capability": BLACKWELL}),
    ((*GTP, "--ckpt-format", "torch"), {}),
    ((*GTP, "--dist-ckpt-optim-fully-reshardable"), {}),
    ((*GTP, "--fp8-recipe", "mxfp8", "--fp8-param-gather",
      "--reuse-grad-buf-for-mxfp8-param-ag"), {}),
    ((*GTP, "--gtp-remat-nccl-ub"), {}),
    (("--fp4-format", "e2m1", "--ddp-average-in-collective", "--ckpt-format", "fsdp_dtensor"),
     {}),
])
def test_near_misses_pass(resolve, argv, kwargs):
    assert resolve(*argv, **kwargs).tensor_model_parallel_size in (1, 2)


@pytest.mark.parametrize("argv, dest, expected", [
    (GTP, "gtp_weight_remat_size",
     (2, "derived", "weight shards / tensor-parallel size",
      ("tensor_parallel_num_weight_shards", "tensor_model_parallel_size"))),
    (GTP, "expert_tensor_parallel_num_weight_shards",
     (2, "derived", "defaults to the tensor-parallel size times the remat size",
      ("expert_tensor_parallel_size", "tensor_model_parallel_size"))),
    (GTP, "data_parallel_size",
     (2, "derived", "the GTP remat ranks of a replica share its weights",
      ("data_parallel_size", "gtp_weight_remat_size"))),
    (EXPERT, "tensor_parallel_num_weight_shards",
     (1, "derived", "defaults to the tensor-parallel size times the remat size",
      ("tensor_model_parallel_size",))),
    (EXPERT, "expert_gtp_weight_remat_size",
     (4, "derived", "weight shards / tensor-parallel size",
      ("expert_tensor_parallel_num_weight_shards", "expert_tensor_parallel_size",
       "tensor_model_parallel_size"))),
])
def test_each_layout_derivation_provenance(resolve, argv, dest, expected):
    assert provenance(resolve(*argv), dest) == expected


def test_the_fp32_accumulating_reduce_scatter_is_turned_off_whole(resolve):
    resolved = resolve(*GTP, "--bf16", "--gtp-remat-reduce-scatter-with-fp32-accumulation")
    assert provenance(resolved, "gtp_remat_reduce_scatter_with_fp32_accumulation") == (
        False, "derived", "", ("accumulate_allreduce_grads_in_fp32",))
    assert warned(resolved) == [
        ("turning off --gtp-remat-reduce-scatter-with-fp32-accumulation: "
         "--accumulate-allreduce-grads-in-fp32 already reduces in fp32",
         ("--gtp-remat-reduce-scatter-with-fp32-accumulation",
          "--accumulate-allreduce-grads-in-fp32"))]


def test_the_nccl_buffers_take_precedence_over_the_fp32_reduce_scatter(resolve):
    resolved = resolve(*GTP, "--gtp-remat-nccl-ub",
                       "--gtp-remat-reduce-scatter-with-fp32-accumulation")
    assert warned(resolved) == [
        ("--gtp-remat-nccl-ub takes precedence over "
         "--gtp-remat-reduce-scatter-with-fp32-accumulation on its groups (NVLS reduce-scatters "
         "already accumulate in fp32)",
         ("--gtp-remat-nccl-ub", "--gtp-remat-reduce-scatter-with-fp32-accumulation"))]


@pytest.mark.parametrize("argv, groups, added", [
    (GTP, ["gtp_remat"], "'gtp_remat'"),
    ((*GTP, *EXPERT), ["gtp_remat", "expt_gtp_remat"], "'gtp_remat', 'expt_gtp_remat'"),
    ((*GTP, "--high-priority-stream-groups", "dp"), ["dp", "gtp_remat"], "'gtp_remat'"),
])
def test_blackwell_gives_gtp_streams_priority_whole(resolve, argv, groups, added):
    resolved = resolve(*argv, capability=BLACKWELL)
    assert provenance(resolved, "high_priority_stream_groups") == (
        groups, "derived", "GTP communication gets high-priority streams on Blackwell",
        ("gtp_weight_remat_size", "expert_gtp_weight_remat_size"))
    assert warned(resolved) == [(f"adding {added} to the high-priority stream groups",
                                 ("--high-priority-stream-groups",))]


@pytest.mark.parametrize("argv, capability", [
    (GTP, (9, 0)), (GTP, None), ((), BLACKWELL),
    ((*GTP, "--high-priority-stream-groups", "gtp_remat"), BLACKWELL),
])
def test_stream_priorities_left_alone(resolve, argv, capability):
    resolved = resolve(*argv, capability=capability)
    assert resolved.source("high_priority_stream_groups").source in ("default", "command-line")
    assert warned(resolved) == []


def test_nccl_simple_protocol_is_pointed_out(resolve):
    assert warned(resolve(*GTP, env={"NCCL_PROTO": "Simple"})) == [
        ("GTP usually runs faster with NCCL_PROTO=LL128 or LL than with NCCL_PROTO=Simple", ())]
    assert warned(resolve(*GTP, env={"NCCL_PROTO": "LL128"})) == []


def test_no_gtp_leaves_the_data_parallel_size_alone(resolve):
    resolved = resolve("--tensor-model-parallel-size", "2")
    assert resolved.data_parallel_size == 4
    assert resolved.source("data_parallel_size").plugin == "parallel"


def test_the_refined_data_parallel_size_is_a_whole_number(resolve):
    assert type(resolve(*GTP).data_parallel_size) is int


def test_expert_rematerialization_alone_turns_the_checks_on(reported):
    assert reported("--expert-tensor-parallel-size", "2",
                    "--expert-tensor-parallel-num-weight-shards", "4",
                    "--ddp-average-in-collective") == [
        (f"{NAMED} does not work with --ddp-average-in-collective",
         ("--ddp-average-in-collective",), "drop --ddp-average-in-collective")]


@dataclass
class _Sizes:
    world_size: Annotated[int, FromEnv("WORLD_SIZE")] = 1
    data_parallel_size: Annotated[int, Computed()] = 1


class _ParallelOnly:
    """The parallel plugin's sizes alone: no training (--cuda-graph-impl) and no
    checkpointing (--ckpt-format) plugin, whose settings are then Megatron's defaults."""

    megaplug_plugin = PluginInfo(name="parallel")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_argument("--tensor-model-parallel-size", type=int, default=1)
        flags.add_options(_Sizes)

    @hookimpl
    def derive(self, config: Any) -> None:
        config.set("data_parallel_size",
                   config.world_size // config.tensor_model_parallel_size)


class _PrecisionOnly:
    megaplug_plugin = PluginInfo(name="precision")


def test_without_training_and_checkpointing_their_defaults_apply():
    kernel, _ = megaplug.load(builtins=[_ParallelOnly(), _PrecisionOnly(), megaplug_gtp],
                              environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    environ = {"WORLD_SIZE": "8"}
    resolved = kernel.resolve(list(GTP), environ=environ, target=megaplug.TargetEnvironment(
        device_capability=BLACKWELL, environ=environ))
    assert resolved.gtp_weight_remat_size == 2


def test_a_tensor_parallel_size_of_zero_splits_weights_as_one():
    # the parallel plugin refuses TP 0; GTP reads it as 1 and adds nothing of its own
    from megaplug.testing import resolve as resolve_all

    with pytest.raises(megaplug.ConfigError) as info:
        resolve_all("--tensor-model-parallel-size", "0",
                    "--tensor-parallel-num-weight-shards", "3", environ={"WORLD_SIZE": "8"})
    assert [p.plugin for p in info.value.problems] == ["parallel"]
