"""Each RL check, accepted and rejected, against a small stand-in for the other plugins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import pytest
from typing_extensions import Annotated

import megaplug
import megaplug_rl
from megaplug import Flag, PluginInfo, TargetEnvironment, hookimpl

NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}


@dataclass
class PeerOptions:
    """The settings of other plugins that the RL checks read, with Megatron's defaults."""

    micro_batch_size: Annotated[Optional[int], Flag()] = None
    global_batch_size: Annotated[Optional[int], Flag()] = None
    cuda_graph_impl: Annotated[str, Flag(
        choices=("none", "local", "transformer_engine", "full_iteration"))] = "none"
    inference_dynamic_batching_unified_memory_level: Annotated[int, Flag(choices=(0, 1))] = 0
    exit_interval: Annotated[Optional[int], Flag()] = None
    save_interval: Annotated[Optional[int], Flag()] = None
    context_parallel_size: Annotated[int, Flag()] = 1
    inference_shards: Annotated[Optional[str], Flag()] = None
    skip_train: Annotated[bool, Flag()] = False
    no_load_optim: Annotated[bool, Flag()] = False


class Peers:
    """Stands in for the training, checkpointing and inference plugins."""

    megaplug_plugin = PluginInfo(name="peers", description="Test stand-in.")

    @hookimpl
    def add_args(self, flags: object) -> None:
        flags.add_options(PeerOptions)  # type: ignore[attr-defined]


PEERS = Peers()
BASE = ["--perform-rl-step", "--micro-batch-size", "1", "--global-batch-size", "64"]
NO_SAVER = TargetEnvironment(packages={})
WITH_SAVER = TargetEnvironment(packages={"torch_memory_saver": "0.0.9"})


def resolve(argv: Sequence[str], target: TargetEnvironment = NO_SAVER) -> megaplug.Resolved:
    kernel, _ = megaplug.load(builtins=[PEERS, megaplug_rl], environ=NO_AUTOLOAD)
    return kernel.resolve(list(argv), environ={}, target=target)


def rl_problems(argv: Sequence[str], target: TargetEnvironment = NO_SAVER) -> list[str]:
    """Messages (with hints) of the problems the rl plugin reports; [] when accepted."""
    try:
        resolve(argv, target)
    except megaplug.ConfigError as error:
        assert all(p.plugin == "rl" for p in error.problems), error
        return [str(p) for p in error.problems]
    return []


def test_defaults_pass() -> None:
    assert rl_problems(BASE) == []


def test_checks_apply_only_to_rl_runs() -> None:
    argv = ["--rl-kv-cache-management-mode", "offload", "--rl-consumption-granularity", "R",
            "--rl-persist-cuda-graphs", "--rl-use-sequence-packing", "--micro-batch-size", "4"]
    assert rl_problems(argv) == []


def test_persisted_graphs_need_a_graph_impl() -> None:
    [problem] = rl_problems(BASE + ["--rl-persist-cuda-graphs"])
    assert "--rl-persist-cuda-graphs" in problem and "--cuda-graph-impl" in problem
    assert problem.startswith("[rl]")
    assert rl_problems(BASE + ["--rl-persist-cuda-graphs", "--cuda-graph-impl", "local"]) == []


def test_training_graphs_need_a_graph_impl() -> None:
    [problem] = rl_problems(BASE + ["--rl-training-cuda-graphs"])
    assert "--rl-training-cuda-graphs" in problem and "none" in problem
    assert rl_problems(BASE + ["--rl-training-cuda-graphs", "--cuda-graph-impl",
                               "transformer_engine"]) == []


@pytest.mark.parametrize("extra, target", [
    (["--inference-dynamic-batching-unified-memory-level", "1"], NO_SAVER),
    ([], WITH_SAVER),
])
def test_persisted_graphs_with_recompute_need_static_memory(
        extra: list[str], target: TargetEnvironment) -> None:
    argv = BASE + ["--cuda-graph-impl", "local", "--rl-persist-cuda-graphs",
                   "--rl-kv-cache-management-mode", "recompute"]
    [problem] = rl_problems(argv)
    assert "--rl-kv-cache-management-mode recompute" in problem
    assert "torch_memory_saver" in problem
    assert rl_problems(argv + extra, target) == []


def test_persisted_graphs_with_persisted_cache_need_nothing_more() -> None:
    argv = BASE + ["--cuda-graph-impl", "local", "--rl-persist-cuda-graphs"]
    assert rl_problems(argv) == []


def test_offloaded_cache_needs_persisted_graphs() -> None:
    argv = BASE + ["--cuda-graph-impl", "local", "--rl-kv-cache-management-mode", "offload"]
    [problem] = rl_problems(argv, WITH_SAVER)
    assert "offload requires --rl-persist-cuda-graphs" in problem
    assert rl_problems(argv + ["--rl-persist-cuda-graphs"], WITH_SAVER) == []


def test_offloaded_cache_excludes_unified_memory() -> None:
    argv = BASE + ["--cuda-graph-impl", "local", "--rl-persist-cuda-graphs",
                   "--rl-kv-cache-management-mode", "offload"]
    [problem] = rl_problems(argv + ["--inference-dynamic-batching-unified-memory-level", "1"])
    assert "unified memory" in problem
    assert "--inference-dynamic-batching-unified-memory-level 1" in problem
    assert rl_problems(argv, WITH_SAVER) == []


SEPARATE = ["--rl-inference-tensor-model-parallel-size", "2"]


def test_weight_offload_needs_uvm_or_memory_saver() -> None:
    argv = BASE + SEPARATE + ["--rl-offload-inference-model-weights-when-idle"]
    [problem] = rl_problems(argv)
    assert "--rl-offload-inference-model-weights-when-idle" in problem
    assert "--rl-inference-model-unified-memory-level 1" in problem
    assert rl_problems(argv + ["--rl-inference-model-unified-memory-level", "1"]) == []
    assert rl_problems(argv, WITH_SAVER) == []


@pytest.mark.parametrize("separate", [
    SEPARATE,
    ["--rl-inference-expert-model-parallel-size", "4"],
    ["--inference-shards", "2"],
    ["--context-parallel-size", "2"],
])
def test_weight_offload_needs_a_separate_inference_model(separate: list[str]) -> None:
    argv = BASE + ["--rl-offload-inference-model-weights-when-idle"]
    [problem] = rl_problems(argv, WITH_SAVER)
    assert "requires a separate inference model" in problem
    assert "--rl-inference-*-model-parallel-size" in problem and "--inference-shards" in problem
    assert rl_problems(argv + separate, WITH_SAVER) == []


def test_generation_lag_needs_partial_rollouts() -> None:
    [problem] = rl_problems(BASE + ["--rl-generation-lag", "2"])
    assert "--rl-generation-lag requires --rl-partial-rollouts when above 0 (got 2)" in problem
    assert rl_problems(BASE + ["--rl-generation-lag", "2", "--rl-partial-rollouts"]) == []
    assert rl_problems(BASE + ["--rl-generation-lag", "0"]) == []


def test_generation_lag_is_at_least_minus_one() -> None:
    [problem] = rl_problems(BASE + ["--rl-generation-lag", "-2"])
    assert "--rl-generation-lag -2 must be >= -1" in problem
    assert resolve(BASE + ["--rl-generation-lag", "-1"]).rl_generation_lag == -1
    assert resolve(BASE + ["--rl-generation-lag", "0.5", "--rl-partial-rollouts"]
                   ).rl_generation_lag == 0.5


def test_generation_lag_defaults_to_synchronous_without_partial_rollouts() -> None:
    """Megatron-LM main: 0 without partial rollouts, unset (tuned at launch) with them."""
    resolved = resolve(BASE)
    assert resolved.rl_generation_lag == 0
    assert resolved.source("rl_generation_lag").plugin == "rl"
    assert resolve(BASE + ["--rl-partial-rollouts"]).rl_generation_lag is None
    assert resolve(["--micro-batch-size", "1"]).rl_generation_lag is None  # not an RL run


def test_inflight_requests_set_the_generation_lag() -> None:
    # 32 prompts x 2 rollouts = 64 requests per trainer batch
    assert resolve(BASE + ["--rl-max-inflight-requests", "32"]).rl_generation_lag == -0.5
    resolved = resolve(BASE + ["--rl-max-inflight-requests", "192", "--rl-partial-rollouts"])
    assert resolved.rl_generation_lag == 2.0
    assert resolved.source("rl_generation_lag").inputs == (
        "rl_max_inflight_requests", "grpo_prompts_per_step", "grpo_group_size")


@pytest.mark.parametrize("argv, message", [
    (["--rl-max-inflight-requests", "64", "--rl-generation-lag", "1", "--rl-partial-rollouts"],
     "--rl-generation-lag and --rl-max-inflight-requests are mutually exclusive"),
    (["--rl-max-inflight-requests", "0", "--rl-partial-rollouts"],
     "--rl-max-inflight-requests 0 must be >= 1"),
    (["--rl-max-inflight-requests", "128"],
     "--rl-max-inflight-requests 128 above one training batch (64 requests: "
     "--grpo-prompts-per-step x --grpo-group-size) requires --rl-partial-rollouts"),
])
def test_inflight_request_checks(argv: list[str], message: str) -> None:
    [problem] = rl_problems(BASE + argv)
    assert message in problem


@pytest.mark.parametrize("granularity", ["R", "G"])
def test_streamed_submission_needs_partial_rollouts(granularity: str) -> None:
    """Megatron-LM main: any submission but whole batches (0.19.2: only R)."""
    argv = BASE + ["--rl-submission-granularity", granularity]
    [problem] = rl_problems(argv)
    assert f"--rl-submission-granularity {granularity} requires --rl-partial-rollouts" in problem
    assert rl_problems(argv + ["--rl-partial-rollouts"]) == []


def test_rollout_consumption_is_unsupported() -> None:
    [problem] = rl_problems(BASE + ["--rl-consumption-granularity", "R"])
    assert "--rl-consumption-granularity R is not currently supported" in problem
    assert rl_problems(BASE + ["--rl-submission-granularity", "G", "--rl-partial-rollouts",
                               "--rl-consumption-granularity", "G"]) == []


def test_batch_submission_with_group_consumption() -> None:
    [problem] = rl_problems(BASE + ["--rl-consumption-granularity", "G"])
    assert "--rl-submission-granularity B" in problem
    assert "--rl-consumption-granularity G" in problem


def test_sequence_packing_needs_micro_batch_one() -> None:
    argv = ["--perform-rl-step", "--global-batch-size", "64", "--rl-use-sequence-packing"]
    [problem] = rl_problems(argv + ["--micro-batch-size", "2"])
    assert "--micro-batch-size 1, got 2" in problem
    assert rl_problems(argv + ["--micro-batch-size", "1"]) == []


def test_rollouts_fill_global_batches() -> None:
    # 32 prompts x 2 rollouts x 2 iterations = 128 rollouts per phase
    [problem] = rl_problems(["--perform-rl-step", "--global-batch-size", "48"])
    assert "= 128 rollouts" in problem and "--global-batch-size 48" in problem
    assert rl_problems(["--perform-rl-step", "--global-batch-size", "128"]) == []
    assert rl_problems(["--perform-rl-step", "--global-batch-size", "48",
                        "--grpo-prompts-per-step", "24"]) == []


@pytest.mark.parametrize("flag", ["--exit-interval", "--save-interval"])
def test_intervals_on_rollout_boundaries(flag: str) -> None:
    # 128 rollouts / 64 per global batch = 2 training iterations per inference phase
    [problem] = rl_problems(BASE + [flag, "3"])
    assert f"{flag} 3 is not a multiple of the 2 training iterations" in problem
    assert rl_problems(BASE + [flag, "4"]) == []


@pytest.mark.parametrize("flag", ["--exit-interval", "--save-interval"])
@pytest.mark.parametrize("empty", [["--grpo-prompts-per-step", "0"], ["--grpo-group-size", "0"],
                                   ["--grpo-iterations", "0"]])
def test_intervals_with_empty_rollout_phases(flag: str, empty: list[str]) -> None:
    # Megatron takes the interval modulo the phase's iteration count (0 here) and fails.
    [problem] = rl_problems(BASE + empty + [flag, "4"])
    assert f"{flag} 4 cannot be aligned with GRPO inference phases" in problem
    assert "= 0)" in problem
    assert rl_problems(BASE + empty) == []


def test_optimizer_offload_needs_an_optimizer() -> None:
    argv = BASE + ["--skip-train", "--rl-offload-optimizer-during-inference"]
    [problem] = rl_problems(argv + ["--no-load-optim"])
    assert "--rl-offload-optimizer-during-inference" in problem and "--skip-train" in problem
    assert rl_problems(argv) == []


def test_every_problem_is_reported_at_once() -> None:
    problems = rl_problems(BASE + ["--rl-consumption-granularity", "R",
                                   "--rl-generation-lag", "1", "--micro-batch-size", "2",
                                   "--rl-use-sequence-packing"])
    assert len(problems) == 3


# -- each problem whole: the message, every flag it names and the hint -------------------

LOCAL = ["--cuda-graph-impl", "local"]
SAVER = "torch_memory_saver"
SEPARATE = ["--rl-inference-tensor-model-parallel-size", "2"]
GRPO_FLAGS = ("--grpo-prompts-per-step", "--grpo-group-size", "--grpo-iterations")
INFERENCE_SIZE_FLAGS = ("--rl-inference-tensor-model-parallel-size",
                        "--rl-inference-pipeline-model-parallel-size",
                        "--rl-inference-expert-model-parallel-size",
                        "--rl-inference-expert-tensor-model-parallel-size")


@pytest.mark.parametrize("argv, expected", [
    (["--rl-persist-cuda-graphs"],
     ("--rl-persist-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs are "
      "built to persist", ("--rl-persist-cuda-graphs", "--cuda-graph-impl"),
      "choose a --cuda-graph-impl (e.g. local), or drop --rl-persist-cuda-graphs")),
    (["--rl-training-cuda-graphs"],
     ("--rl-training-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs are "
      "built for training", ("--rl-training-cuda-graphs", "--cuda-graph-impl"),
      "choose a --cuda-graph-impl (e.g. local), or drop --rl-training-cuda-graphs")),
    (["--rl-persist-cuda-graphs", *LOCAL, "--rl-kv-cache-management-mode", "recompute"],
     ("--rl-persist-cuda-graphs with --rl-kv-cache-management-mode recompute needs KV cache "
      f"memory at fixed addresses, but neither unified memory nor {SAVER} is available",
      ("--rl-persist-cuda-graphs", "--rl-kv-cache-management-mode",
       "--inference-dynamic-batching-unified-memory-level"),
      "use --rl-kv-cache-management-mode persist, set "
      f"--inference-dynamic-batching-unified-memory-level 1, or install {SAVER}")),
    (["--rl-kv-cache-management-mode", "offload", *LOCAL],
     ("--rl-kv-cache-management-mode offload requires --rl-persist-cuda-graphs: CUDA graphs "
      "cannot be recaptured while the KV cache is offloaded",
      ("--rl-kv-cache-management-mode", "--rl-persist-cuda-graphs"),
      "add --rl-persist-cuda-graphs, or use --rl-kv-cache-management-mode persist or "
      "recompute")),
    (["--rl-kv-cache-management-mode", "offload", "--rl-persist-cuda-graphs", *LOCAL,
      "--inference-dynamic-batching-unified-memory-level", "1"],
     ("--rl-kv-cache-management-mode offload cannot be combined with unified memory "
      "(--inference-dynamic-batching-unified-memory-level 1)",
      ("--rl-kv-cache-management-mode", "--inference-dynamic-batching-unified-memory-level"),
      "use --inference-dynamic-batching-unified-memory-level 0, or "
      "--rl-kv-cache-management-mode persist")),
    (["--rl-offload-inference-model-weights-when-idle", *SEPARATE],
     ("--rl-offload-inference-model-weights-when-idle needs unified memory "
      f"(--rl-inference-model-unified-memory-level 1) or the {SAVER} package",
      ("--rl-offload-inference-model-weights-when-idle",
       "--rl-inference-model-unified-memory-level"),
      f"set --rl-inference-model-unified-memory-level 1, or install {SAVER}")),
    (["--rl-offload-inference-model-weights-when-idle",
      "--rl-inference-model-unified-memory-level", "1"],
     ("--rl-offload-inference-model-weights-when-idle requires a separate inference model, "
      "but inference shares the training model's weights",
      ("--rl-offload-inference-model-weights-when-idle", *INFERENCE_SIZE_FLAGS),
      "set an --rl-inference-*-model-parallel-size (or --inference-shards), or drop "
      "--rl-offload-inference-model-weights-when-idle")),
    (["--rl-generation-lag", "2"],
     ("--rl-generation-lag requires --rl-partial-rollouts when above 0 (got 2)",
      ("--rl-generation-lag", "--rl-partial-rollouts"),
      "add --rl-partial-rollouts, or set --rl-generation-lag 0")),
    (["--rl-submission-granularity", "R"],
     ("--rl-submission-granularity R requires --rl-partial-rollouts (rollouts are streamed, "
      "not submitted as a whole batch)", ("--rl-submission-granularity", "--rl-partial-rollouts"),
      "add --rl-partial-rollouts, or use --rl-submission-granularity B")),
    (["--rl-max-inflight-requests", "0"],
     ("--rl-max-inflight-requests 0 must be >= 1", ("--rl-max-inflight-requests",),
      "use 1 or more, or drop --rl-max-inflight-requests")),
    (["--rl-generation-lag", "-1.5"],
     ("--rl-generation-lag -1.5 must be >= -1", ("--rl-generation-lag",),
      "use -1 (one unit of generation work in flight) or more")),
    (["--rl-consumption-granularity", "R"],
     ("--rl-consumption-granularity R is not currently supported",
      ("--rl-consumption-granularity",),
      "use --rl-consumption-granularity G or B")),
    (["--rl-submission-granularity", "B", "--rl-consumption-granularity", "G"],
     ("--rl-submission-granularity B cannot be combined with --rl-consumption-granularity G",
      ("--rl-submission-granularity", "--rl-consumption-granularity"),
      "use --rl-submission-granularity G or R (with --rl-partial-rollouts), or "
      "--rl-consumption-granularity B")),
    (["--rl-use-sequence-packing", "--micro-batch-size", "2"],
     ("--rl-use-sequence-packing requires --micro-batch-size 1, got 2",
      ("--rl-use-sequence-packing", "--micro-batch-size"),
      "set --micro-batch-size 1 and raise --seq-length for more work per micro batch, or "
      "drop --rl-use-sequence-packing")),
    (["--grpo-prompts-per-step", "3"],
     ("--grpo-prompts-per-step 3 x --grpo-group-size 2 x --grpo-iterations 2 = 12 rollouts "
      "per inference phase is not a multiple of --global-batch-size 64",
      (*GRPO_FLAGS, "--global-batch-size"),
      "make the product a multiple of 64, or use a global batch size that divides 12")),
    (["--save-interval", "3"],
     ("--save-interval 3 is not a multiple of the 2 training iterations of one GRPO inference "
      "phase (128 rollouts / --global-batch-size 64)",
      ("--save-interval", *GRPO_FLAGS, "--global-batch-size"),
      "use a multiple of 2 for --save-interval, since generated rollouts are not "
      "checkpointed")),
    (["--exit-interval", "3", "--grpo-prompts-per-step", "0"],
     ("--exit-interval 3 cannot be aligned with GRPO inference phases that generate no "
      "rollouts (--grpo-prompts-per-step 0 x --grpo-group-size 2 x --grpo-iterations 2 = 0)",
      ("--exit-interval", *GRPO_FLAGS),
      "make --grpo-prompts-per-step, --grpo-group-size and --grpo-iterations positive, or "
      "drop --exit-interval")),
    (["--rl-offload-optimizer-during-inference", "--skip-train", "--no-load-optim"],
     ("--rl-offload-optimizer-during-inference has no optimizer to offload: --skip-train with "
      "--no-load-optim builds none",
      ("--rl-offload-optimizer-during-inference", "--skip-train", "--no-load-optim"),
      "drop --rl-offload-optimizer-during-inference for an inference-only run")),
])
def test_each_problem_whole(argv: list[str], expected: tuple) -> None:
    with pytest.raises(megaplug.ConfigError) as info:
        resolve([*BASE, *argv])
    assert [(p.message, tuple(p.flags), p.hint) for p in info.value.problems] == [expected]


@pytest.mark.parametrize("argv", [
    ["--rl-persist-cuda-graphs", *LOCAL, "--rl-kv-cache-management-mode", "recompute",
     "--inference-dynamic-batching-unified-memory-level", "1"],
    ["--rl-offload-inference-model-weights-when-idle", "--inference-shards", "2",
     "--rl-inference-model-unified-memory-level", "1"],
    ["--rl-offload-inference-model-weights-when-idle", "--context-parallel-size", "2",
     "--rl-inference-model-unified-memory-level", "1"],
    ["--rl-generation-lag", "0"],
    ["--rl-generation-lag", "1", "--rl-partial-rollouts"],
    ["--rl-offload-optimizer-during-inference", "--skip-train"],
    ["--rl-offload-optimizer-during-inference", "--no-load-optim"],
    ["--exit-interval", "4", "--save-interval", "2"],
])
def test_near_misses_pass(argv: list[str]) -> None:
    assert resolve([*BASE, *argv]).perform_rl_step is True


@pytest.mark.parametrize("argv", [
    ["--rl-persist-cuda-graphs", *LOCAL, "--rl-kv-cache-management-mode", "recompute"],
    ["--rl-offload-inference-model-weights-when-idle", *SEPARATE],
])
def test_the_memory_saver_keeps_addresses_fixed(argv: list[str]) -> None:
    assert resolve([*BASE, *argv], WITH_SAVER).perform_rl_step is True


# -- without the plugins owning the settings the checks read: Megatron's defaults ---------


def rl_alone_problems(argv: Sequence[str]) -> list[str]:
    kernel, _ = megaplug.load(builtins=[megaplug_rl], environ=NO_AUTOLOAD)
    try:
        kernel.resolve(["--perform-rl-step", *argv], environ={}, target=NO_SAVER)
    except megaplug.ConfigError as error:
        return [p.message for p in error.problems]
    return []


def test_alone_no_cuda_graphs_and_no_unified_memory() -> None:
    # no --cuda-graph-impl (training) means none; no unified memory level (inference) is 0
    assert rl_alone_problems(["--rl-persist-cuda-graphs", "--rl-kv-cache-management-mode",
                              "recompute"]) == [
        "--rl-persist-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs are "
        "built to persist",
        "--rl-persist-cuda-graphs with --rl-kv-cache-management-mode recompute needs KV cache "
        f"memory at fixed addresses, but neither unified memory nor {SAVER} is available"]
    assert rl_alone_problems(["--rl-training-cuda-graphs"]) == [
        "--rl-training-cuda-graphs is set but --cuda-graph-impl is none, so no CUDA graphs are "
        "built for training"]


def test_alone_no_context_parallelism() -> None:
    assert rl_alone_problems(["--rl-offload-inference-model-weights-when-idle",
                              "--rl-inference-model-unified-memory-level", "1"]) == [
        "--rl-offload-inference-model-weights-when-idle requires a separate inference model, "
        "but inference shares the training model's weights"]


def test_a_context_parallel_size_of_zero_is_not_context_parallelism() -> None:
    with pytest.raises(megaplug.ConfigError):
        resolve([*BASE, "--rl-offload-inference-model-weights-when-idle",
                 "--rl-inference-model-unified-memory-level", "1",
                 "--context-parallel-size", "0"])


def test_intervals_without_a_global_batch_size_are_not_checked() -> None:
    resolved = resolve(["--perform-rl-step", "--micro-batch-size", "1", "--save-interval", "3",
                        "--exit-interval", "5"])
    assert (resolved.save_interval, resolved.exit_interval) == (3, 5)
