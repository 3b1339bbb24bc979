"""FSDP's checks that involve built-in settings, and the built-in rules FSDP takes over.

Resolved with the real built-in plugins: a built-in rule that would misjudge an FSDP launch
(sharded parameters, CUDA connections) is superseded while FSDP is in use, and without FSDP
the built-in rule still applies.
"""

from __future__ import annotations

from typing import Sequence

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
MFSDP = ["--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"]
FSDP2 = ["--use-torch-fsdp2", "--untie-embeddings-and-output-weights",
         "--no-gradient-accumulation-fusion"]


def _resolve(extra: Sequence[str], connections: str | None = "1") -> megaplug.Resolved:
    environ = {"WORLD_SIZE": "8", "RANK": "0"}
    if connections is not None:
        environ["CUDA_DEVICE_MAX_CONNECTIONS"] = connections
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=(9, 0), environ=environ)
    return megaplug.resolve([*DENSE_GPT, *extra], environ=environ, target=target)


def _problems(extra: Sequence[str], **kwargs: str | None) -> list[megaplug.Problem]:
    try:
        _resolve(extra, **kwargs)
    except megaplug.ConfigError as exc:
        return list(exc.problems)
    return []


def test_torch_dcp_is_only_supported_with_fsdp2():
    found = [p for p in _problems(["--ckpt-format", "torch_dcp"]) if p.plugin == "fsdp"]
    assert [(p.message, p.rule) for p in found] == [
        ("--ckpt-format torch_dcp is only supported with --use-torch-fsdp2",
         "check_torch_dcp_format")]
    assert _resolve([*FSDP2, "--ckpt-format", "torch_dcp"], connections=None)


def test_dynamic_context_parallel_does_not_run_on_megatron_fsdp():
    found = _problems([*MFSDP, "--dynamic-context-parallel"], connections=None)
    assert ("--dynamic-context-parallel does not work with Megatron-FSDP", "fsdp") in [
        (p.message, p.plugin) for p in found]


def test_emerging_optimizers_do_not_run_under_fsdp():
    found = _problems([*FSDP2, "--optimizer", "muon"], connections=None)
    assert ("--optimizer muon does not support --use-torch-fsdp2 yet", "fsdp") in [
        (p.message, p.plugin) for p in found]


def test_fsdp_turns_the_connection_requirement_of_tp_into_a_warning():
    tp = ["--tensor-model-parallel-size", "2"]
    assert any("CUDA_DEVICE_MAX_CONNECTIONS=1" in p.message and p.plugin == "parallel"
               for p in _problems(tp, connections="32"))
    resolved = _resolve([*MFSDP, *tp], connections="32")
    [warning] = [w for w in resolved.warnings if "wants opposite" in w.message]
    assert warning.plugin == "fsdp" and "Megatron-FSDP" in warning.message


def test_fsdp_shards_the_parameters_low_precision_gathers_need():
    gather = ["--fp8-format", "e4m3", "--fp8-param-gather", "--bf16"]
    assert any(p.rule == "check_param_gather_sharding" for p in _problems(gather))
    assert _resolve([*FSDP2, *gather], connections=None).fp8_param_gather is False  # TE 2


def test_megatron_fsdp_shards_the_parameters_an_overlapped_gather_needs():
    overlap = ["--overlap-param-gather", "--overlap-grad-reduce"]
    assert any(p.rule == "check_overlap_param_gather_sharding" for p in _problems(overlap))
    assert _resolve([*MFSDP, *overlap, "--megatron-fsdp-version", "2"],
                    connections=None).overlap_param_gather is True
