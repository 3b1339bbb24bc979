"""Manifold hyper-connection (mHC) rules whole (message, flags, hint) with their near misses.
Megatron's checks: TransformerConfig.__post_init__ ("mhc" in selective recompute_modules,
and what enable_mhc_connections excludes: MTP, full recompute, fused inference TP
communication, pipeline stages, fp32 residuals, fewer than one Sinkhorn iteration, a negative
initial gating factor)."""

from __future__ import annotations

import pytest
from preflight_launches import problems

AT_MODEL_BUILD = "; Megatron would raise this when building the model"
MHC = "--enable-mhc-connections"
MODULES = "--recompute-modules"
#: Hyper-connections recomputed selectively: what Megatron recommends, and passes.
RECOMPUTED = ["--recompute-granularity", "selective", MODULES, "mhc"]
#: Full recomputation as validate_args accepts it.
FULL = ["--recompute-granularity", "full", "--recompute-method", "uniform",
        "--recompute-num-layers", "1"]
OFFLOADING = ["--fine-grained-activation-offloading", "--offload-modules", "core_attn"]


def whole(argv: list[str]) -> list[tuple[str, tuple[str, ...], str]]:
    """Pre-flight's problems as (message without the common ending, flags, hint), after
    making sure no other plugin objects."""
    found = problems(argv)
    assert not [str(p) for p in found if p.plugin != "preflight"]
    assert all(p.message.endswith(AT_MODEL_BUILD) for p in found)
    return [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in found]


NEEDS_MHC = (f"{MODULES} mhc needs {MHC}", (MODULES, MHC), f"add {MHC}")
NOT_WITH_MLP = (f"{MODULES} mhc and mlp cannot be used together", (MODULES,), "keep one of the two")
NOT_WITH_OFFLOADING = (f"{MODULES} mhc does not work with --fine-grained-activation-offloading "
                       "yet", (MODULES, "--fine-grained-activation-offloading"),
                       "disable one of the two")


def every(value: str) -> tuple[str, tuple[str, ...], str]:
    return (f"--mhc-recompute-layer-num {value} must be a positive integer",
            ("--mhc-recompute-layer-num",), "use 1 or more")


@pytest.mark.parametrize("argv, found", [
    ([MHC, *RECOMPUTED], []),
    ([MHC, *RECOMPUTED, "core_attn"], []),
    ([MHC, *RECOMPUTED, "--mhc-recompute-layer-num", "1"], []),
    ([MHC, *RECOMPUTED, "--mhc-recompute-layer-num", "3"], []),
    ([MHC], []),
    ([MHC, "--recompute-granularity", "selective", MODULES, "core_attn"], []),
    # without "mhc" among selectively recomputed modules, none of this applies
    (["--recompute-granularity", "selective", MODULES, "mlp", *OFFLOADING,
      "--mhc-recompute-layer-num", "0"], []),
    (["--mhc-recompute-layer-num", "0", *OFFLOADING], []),
    (RECOMPUTED, [NEEDS_MHC]),
    ([MHC, *RECOMPUTED, "mlp"], [NOT_WITH_MLP]),
    ([MHC, "--recompute-granularity", "selective", MODULES, "mlp", "mhc"], [NOT_WITH_MLP]),
    ([MHC, *RECOMPUTED, "--mhc-recompute-layer-num", "0"], [every("0")]),
    ([MHC, *RECOMPUTED, "--mhc-recompute-layer-num", "-3"], [every("-3")]),
    ([MHC, *RECOMPUTED, *OFFLOADING], [NOT_WITH_OFFLOADING]),
    ([*RECOMPUTED, "mlp", *OFFLOADING, "--mhc-recompute-layer-num", "0"],
     [NEEDS_MHC, NOT_WITH_MLP, every("0"), NOT_WITH_OFFLOADING]),
])
def test_recomputing_hyper_connections(argv, found):
    assert whole(argv) == found


def excluded(what: str, flag: str, hint: str) -> tuple[str, tuple[str, ...], str]:
    return (f"{MHC} does not work with {what}", (MHC, flag), hint)


MTP = excluded("multi-token prediction", "--mtp-num-layers", "drop --mtp-num-layers")
FULL_RECOMPUTE = excluded("full recomputation", "--recompute-granularity",
                          "use --recompute-granularity selective --recompute-modules mhc")
PIPELINE = excluded("pipeline parallelism", "--pipeline-model-parallel-size",
                    "use --pipeline-model-parallel-size 1")
FP32_RESIDUAL = excluded("--fp32-residual-connection", "--fp32-residual-connection",
                         "drop --fp32-residual-connection")
FUSED_TP = excluded("--inference-fuse-tp-communication", "--inference-fuse-tp-communication",
                    "drop --inference-fuse-tp-communication")
INFERENCE_OPTIMIZED = ["--transformer-impl", "inference_optimized", "--normalization", "RMSNorm",
                       "--disable-bias-linear"]


def iterations(value: str) -> tuple[str, tuple[str, ...], str]:
    return (f"--mhc-sinkhorn-iterations {value} must be 1 or more",
            ("--mhc-sinkhorn-iterations",), "use at least one Sinkhorn iteration")


def gating(value: str) -> tuple[str, tuple[str, ...], str]:
    return (f"--mhc-init-gating-factor {value} must not be negative",
            ("--mhc-init-gating-factor",), "use 0 or more")


@pytest.mark.parametrize("argv, found", [
    (["--position-embedding-type", "rope", "--mtp-num-layers", "1"], [MTP]),
    # Megatron tests `mtp_num_layers is not None`: even 0 MTP layers
    (["--position-embedding-type", "rope", "--mtp-num-layers", "0"], [MTP]),
    (["--pipeline-model-parallel-size", "2"], [PIPELINE]),
    (["--pipeline-model-parallel-size", "1"], []),
    (["--fp32-residual-connection"], [FP32_RESIDUAL]),
    ([*INFERENCE_OPTIMIZED, "--inference-fuse-tp-communication"], [FUSED_TP]),
    (INFERENCE_OPTIMIZED, []),
    (["--mhc-sinkhorn-iterations", "0"], [iterations("0")]),
    (["--mhc-sinkhorn-iterations", "-1"], [iterations("-1")]),
    (["--mhc-sinkhorn-iterations", "1"], []),
    (["--mhc-init-gating-factor", "-0.5"], [gating("-0.5")]),
    (["--mhc-init-gating-factor", "-0.001"], [gating("-0.001")]),
    (["--mhc-init-gating-factor", "0"], []),
    (["--pipeline-model-parallel-size", "2", "--fp32-residual-connection",
      "--mhc-sinkhorn-iterations", "0", "--mhc-init-gating-factor", "-1"],
     [PIPELINE, FP32_RESIDUAL, iterations("0"), gating("-1.0")]),
])
def test_what_hyper_connections_exclude(argv, found):
    assert whole([MHC, *RECOMPUTED, *argv]) == found


def test_full_recomputation_excludes_hyper_connections():
    assert whole([MHC, *FULL]) == [FULL_RECOMPUTE]
    assert whole(FULL) == []


def test_without_hyper_connections_their_limits_do_not_apply():
    assert whole(["--position-embedding-type", "rope", "--mtp-num-layers", "1",
                  "--pipeline-model-parallel-size", "2", "--fp32-residual-connection",
                  "--mhc-sinkhorn-iterations", "0", "--mhc-init-gating-factor", "-1", *FULL]) == []
