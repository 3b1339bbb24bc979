"""The training plugin: activation recomputation and offloading."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _training_stub import messages, problems, resolve  # noqa: E402


def test_recompute_activations_means_selective():
    resolved = resolve("--recompute-activations")
    assert resolved.recompute_granularity == "selective"
    assert "recompute_activations" not in resolved
    assert "normalized by training" in resolved.source("recompute_granularity").describe()


def test_recompute_defaults_stay_unset():
    resolved = resolve()
    assert (resolved.recompute_granularity, resolved.recompute_method,
            resolved.recompute_modules) == (None, None, None)


def test_selective_recompute_rejects_a_method():
    found = problems("--recompute-granularity", "selective", "--recompute-method", "uniform")
    assert "recompute method is not yet supported for selective recomputing granularity" \
        in found[0].message
    assert found[0].flags == ("--recompute-method", "--recompute-granularity")


def test_recompute_activations_with_method_is_rejected_too():
    assert "selective recomputation" in messages("--recompute-activations",
                                                 "--recompute-method", "block")


def test_full_recompute_with_method():
    resolved = resolve("--recompute-granularity", "full", "--recompute-method", "block",
                       "--recompute-num-layers", "2")
    assert (resolved.recompute_granularity, resolved.recompute_method) == ("full", "block")


def test_selective_modules_are_kept():
    resolved = resolve("--recompute-granularity", "selective", "--recompute-modules", "moe_act",
                       "layernorm")
    assert resolved.recompute_modules == ["moe_act", "layernorm"]


def test_checkpoint_activations_is_retired():
    found = problems("--checkpoint-activations")
    assert found[0].message == "--checkpoint-activations is no longer supported"
    assert "--recompute-activations" in found[0].hint


def test_distributed_saved_activations_requirements():
    text = messages("--distribute-saved-activations")
    assert "needs tensor parallelism" in text
    assert "only with --recompute-granularity full (got None)" in text
    assert "needs a --recompute-method" in text


def test_distributed_saved_activations_accepted():
    resolved = resolve("--distribute-saved-activations", "--tensor-model-parallel-size", "2",
                       "--recompute-granularity", "full", "--recompute-method", "uniform")
    assert resolved.distribute_saved_activations is True


def test_distributed_saved_activations_needs_recent_torch():
    text = messages("--distribute-saved-activations", "--tensor-model-parallel-size", "2",
                    "--recompute-granularity", "full", "--recompute-method", "uniform",
                    packages={"torch": "1.9.0"})
    assert "needs torch >= 1.10, found 1.9.0" in text


def test_cpu_offloading_appears_only_when_layers_are_offloaded():
    assert "cpu_offloading" not in resolve()
    assert resolve("--cpu-offloading-num-layers", "2").cpu_offloading is True


def test_fine_grained_offloading_needs_transformer_engine():
    text = messages("--fine-grained-activation-offloading", "--transformer-impl", "local",
                    env={"NVTE_CPU_OFFLOAD_V1": "1"})
    assert "needs --transformer-impl transformer_engine (got local)" in text


def test_fine_grained_offloading_needs_cpu_offload_v1_with_new_te():
    assert "NVTE_CPU_OFFLOAD_V1=1" in messages("--fine-grained-activation-offloading")
    resolved = resolve("--fine-grained-activation-offloading", "--offload-modules", "moe_act",
                       env={"NVTE_CPU_OFFLOAD_V1": "1"})
    assert resolved.offload_modules == ["moe_act"]


def test_fine_grained_offloading_with_old_te_needs_no_env():
    resolved = resolve("--fine-grained-activation-offloading",
                       packages={"transformer_engine": "2.8.0"})
    assert resolved.fine_grained_activation_offloading is True
