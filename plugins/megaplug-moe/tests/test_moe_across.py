"""MoE's checks that involve built-in settings, and the built-in rule MoE takes over,
resolved with the real built-in plugins."""

from __future__ import annotations

from typing import Sequence

import pytest

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
MOE = ["--num-experts", "4", "--expert-model-parallel-size", "2"]


def _resolve(extra: Sequence[str], connections: str = "1",
             te: str = "2.17.1") -> megaplug.Resolved:
    environ = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": connections}
    target = megaplug.TargetEnvironment(packages={"transformer_engine": te},
                                        device_capability=(9, 0), environ=environ)
    return megaplug.resolve(["-p", "no:preflight", *DENSE_GPT, *MOE, *extra], environ=environ,
                            target=target)


def _moe_problems(extra: Sequence[str], **kwargs: str) -> list[str]:
    try:
        _resolve(extra, **kwargs)
    except megaplug.ConfigError as exc:
        return [p.message for p in exc.problems if p.plugin == "moe"]
    return []


def test_flex_dispatcher_needs_real_communication():
    assert _moe_problems(["--fake-process-group", "--moe-token-dispatcher-type", "flex"]) == [
        "--fake-process-group does not work with --moe-token-dispatcher-type flex"]
    assert _resolve(["--fake-process-group"]).fake_process_group is True


def test_graphed_router_with_delayed_weight_gradients():
    argv = ["--delay-wgrad-compute", "--overlap-grad-reduce", "--cuda-graph-impl",
            "transformer_engine", "--cuda-graph-modules", "moe_router",
            "--moe-shared-expert-intermediate-size", "64"]
    assert _moe_problems(argv, te="2.11.0") == [
        "a CUDA-graphed router beside shared experts, with --delay-wgrad-compute, requires "
        "transformer_engine >= 2.12.0, found 2.11.0"]
    assert _moe_problems([*argv, "--moe-shared-expert-overlap"], te="2.11.0") == []
    assert _moe_problems(argv[:1] + argv[2:], te="2.11.0") == []  # no overlap: not asked


@pytest.mark.parametrize("line, expected", [
    ("0.16.0", []),      # Megatron checks graphs keeping a delayed weight gradient from 0.17
    ("0.17.0", ["a CUDA-graphed router beside shared experts, with --delay-wgrad-compute, "
                "requires transformer_engine >= 2.12.0, found 2.11.0"]),
])
def test_a_graphed_router_is_checked_on_the_releases_that_check_graphed_attention(line, expected):
    environ = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.11.0",
                                                  "megatron_core": line},
                                        device_capability=(9, 0), environ=environ)
    argv = ["-p", "no:preflight", *DENSE_GPT, *MOE, "--delay-wgrad-compute",
            "--overlap-grad-reduce", "--cuda-graph-impl", "transformer_engine",
            "--cuda-graph-scope", "moe_router",
            "--moe-shared-expert-intermediate-size", "64"]
    try:
        megaplug.resolve(argv, environ=environ, target=target)
        found = []
    except megaplug.ConfigError as error:
        found = [p.message for p in error.problems if "delay-wgrad" in p.message]
    assert found == expected


def test_expert_parallel_overlap_turns_the_connection_requirement_into_advice():
    tp = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
    environ = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "32"}
    target = megaplug.TargetEnvironment(device_capability=(9, 0), environ=environ)
    kernel, _ = megaplug.load(["-p", "no:preflight"], environ=environ)  # validate_args' rules
    draft, sink = kernel.parse([*DENSE_GPT, *MOE, *tp], environ=environ, target=target)
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.finish(draft, sink)
    assert [p.rule for p in info.value.problems] == ["check_cuda_device_max_connections"]
    resolved = _resolve([*tp, "--overlap-moe-expert-parallel-comm"], connections="32")
    [advice] = [w for w in resolved.warnings if "CUDA_DEVICE_MAX_CONNECTIONS" in w.message]
    assert advice.plugin == "moe" and advice.rule == (
        "warn_device_connections_with_model_parallelism")
