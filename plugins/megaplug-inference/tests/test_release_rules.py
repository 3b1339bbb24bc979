"""Inference checks that differ between Megatron releases (docs/megatron-release-rules.md):
Megatron 0.18 alone imports flashinfer when it is the sampling backend."""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.testing import problems

BACKEND = ("--inference-dynamic-batching-sampling-backend", "flashinfer", "-p", "no:preflight")


def inference_messages(version: str, flashinfer: str | None) -> list[str]:
    target = TargetEnvironment(packages={"megatron_core": version, "flashinfer": flashinfer,
                                         "multistorageclient": None},
                               device_capability=(9, 0))
    return [p.message for p in problems(*BACKEND, target=target) if p.plugin == "inference"]


def test_flashinfer_backend_needs_the_package_in_0_18():
    assert inference_messages("0.18.2", None) == [
        "--inference-dynamic-batching-sampling-backend flashinfer requires flashinfer, "
        "not installed"]
    assert inference_messages("0.18.2", "0.6.4") == []


@pytest.mark.parametrize("version", ["0.19.0", "main"])
def test_flashinfer_backend_not_checked_from_0_19(version):
    assert inference_messages(version, None) == []


def target(version: str) -> TargetEnvironment:
    return TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None,
                                       "transformer_engine": "2.17.1"},
                             device_capability=(9, 0))


def engine_messages(version: str, *flags: str) -> list[str]:
    return [p.message for p in problems(*flags, "-p", "no:preflight", target=target(version))
            if p.plugin == "inference"]


@pytest.mark.parametrize("version,line", [("0.15.3", "0.15.3"), ("0.17.1", "0.17.1")])
def test_dynamic_batching_blocks_of_256_up_to_0_17(version, line):
    flags = ("--inference-dynamic-batching", "--inference-dynamic-batching-block-size", "300")
    assert engine_messages(version, *flags) == [
        f"--inference-dynamic-batching-block-size 300 must be a multiple of 256 in Megatron "
        f"{line}"]
    assert engine_messages(version, *flags[1:]) == []  # without dynamic batching


@pytest.mark.parametrize("version", ["0.18.2", "main"])
def test_dynamic_batching_blocks_unchecked_from_0_18(version):
    assert engine_messages(version, "--inference-dynamic-batching",
                           "--inference-dynamic-batching-block-size", "300") == []


def test_dynamic_batching_chunks_of_256_in_0_13_and_0_14():
    flags = ("--inference-dynamic-batching", "--inference-dynamic-batching-chunk-size", "300")
    assert engine_messages("0.14.0", *flags) == [
        "--inference-dynamic-batching-chunk-size 300 must be a multiple of 256 in Megatron 0.14.0"]
    assert engine_messages("0.14.0", "--inference-dynamic-batching") == []


@pytest.mark.parametrize("version,refused", [("0.16.1", True), ("0.17.1", True),
                                             ("0.18.2", False)])
def test_dynamic_batching_needs_a_buffer_size_up_to_0_17(tmp_path, version, refused):
    unsized = tmp_path / "unsized.yaml"
    unsized.write_text("inference_dynamic_batching_buffer_size_gb: null\n")
    found = [p.message for p in problems(
        "--inference-dynamic-batching", "-p", "no:preflight", target=target(version),
        config_files=[str(unsized)]) if p.plugin == "inference"]
    line = version  # messages name the exact release in force
    assert found == ([f"--inference-dynamic-batching needs "
                      f"--inference-dynamic-batching-buffer-size-gb in Megatron {line}"]
                     if refused else [])


@pytest.mark.parametrize("version,refused", [("0.15.3", True), ("0.16.1", True),
                                             ("0.17.1", False)])
def test_fp8_whole_iteration_dynamic_batching_graphs_refused_in_0_15_and_0_16(version, refused):
    flags = ("--inference-dynamic-batching", "--cuda-graph-scope", "full_iteration",
             "--cuda-graph-impl", "local", "--fp8-format", "hybrid")
    line = version  # messages name the exact release in force
    assert engine_messages(version, *flags) == ([
        f"FP8 is not supported with dynamic batching and full_iteration CUDA graphs in "
        f"Megatron {line}"] if refused else [])


@pytest.mark.parametrize("version", ["0.15.3", "0.16.1"])
def test_whole_iteration_graphs_need_no_nan_check_in_training_only_in_0_15_and_0_16(version):
    flags = ("--cuda-graph-scope", "full_iteration", "--cuda-graph-impl", "local")
    line = version  # messages name the exact release in force
    assert engine_messages(version, *flags) == [
        f"--cuda-graph-scope full_iteration needs --no-check-for-nan-in-loss-and-grad in "
        f"Megatron {line}"]
    assert engine_messages(version, *flags, "--inference-dynamic-batching") == []
    assert engine_messages(version, *flags, "--no-check-for-nan-in-loss-and-grad") == []
    assert [p.message for p in problems(*flags, target=target(version))
            if p.plugin == "training"] == []


def test_whole_iteration_graphs_in_0_17_are_training_s_check_even_for_dynamic_batching():
    flags = ("--cuda-graph-scope", "full_iteration", "--cuda-graph-impl", "local",
             "--inference-dynamic-batching")
    assert engine_messages("0.17.1", *flags) == []
    assert [p.message for p in problems(*flags, target=target("0.17.1"))
            if p.plugin == "training"] == [
        "--cuda-graph-scope full_iteration needs --no-check-for-nan-in-loss-and-grad in "
        "Megatron 0.17.1"]
