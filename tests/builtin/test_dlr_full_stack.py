"""The data, logging and resilience plugins inside the full built-in stack."""

from __future__ import annotations

import pytest

import megaplug
from megaplug._plugins import BUILTIN_PLUGINS

LAUNCH = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
          "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
          "--train-iters", "10", "--lr", "1e-4"]
ENV = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


@pytest.fixture(scope="module")
def kernel():
    kernel, _ = megaplug.load([], environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    active = {record.name for record in kernel.plugins.active()}
    missing = {name.rsplit(".", 1)[-1] for name in BUILTIN_PLUGINS} - active
    assert not missing, f"built-in plugins failed to load: {', '.join(sorted(missing))}"
    return kernel


def _target() -> megaplug.TargetEnvironment:
    return megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                      device_capability=(9, 0), environ=ENV)


def test_a_typical_launch_resolves_data_logging_and_resilience_values(kernel):
    resolved = kernel.resolve([*LAUNCH, "--data-path", "corpus"],
                              environ=ENV, target=_target(),
                              defaults={"tokenizer_type": "GPT2BPETokenizer"})
    assert resolved.split == "969, 30, 1"
    assert resolved.encoder_seq_length == 128
    assert resolved.variable_seq_lengths is False
    assert resolved.tokenizer_type == "GPT2BPETokenizer"
    assert resolved.inprocess_active_world_size == 8
    assert resolved.eval_micro_batch_size == 2


def test_varlen_packing_sets_variable_lengths_in_the_full_stack(kernel):
    resolved = kernel.resolve([*LAUNCH, "--use-varlen-dataset", "--calculate-per-token-loss",
                               "--mock-data"], environ=ENV, target=_target())
    assert resolved.sequence_packing_scheduler == "dp_balanced"
    assert resolved.variable_seq_lengths is True


def test_two_data_sources_are_rejected_by_the_data_plugin(kernel):
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*LAUNCH, "--mock-data", "--data-path", "corpus"], environ=ENV,
                       target=_target())
    assert any(p.plugin == "data" and "only one data source" in p.message
               for p in info.value.problems)
