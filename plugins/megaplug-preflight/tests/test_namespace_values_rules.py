"""Values no command line, config file or default can hold, set on the namespace by Megatron
code before the facade's validate_args (which does not check a flag's choices or type for
them): each rule's whole problem (message, flags, hint) for such a value, and the near miss
the flag's own choices give."""

from __future__ import annotations

from typing import Any

import pytest
from preflight_launches import DENSE, ENVIRON, MLA, MOE, listed, pre, target

MHC_RECOMPUTED = ["--enable-mhc-connections", "--recompute-granularity", "selective",
                  "--recompute-modules", "mhc"]
DSA = [*MLA, "--experimental-attention-variant", "dsa", "--disable-bias-linear"]
SHARED_EXPERT_OVERLAP = [*MOE, "--moe-shared-expert-intermediate-size", "256",
                         "--moe-shared-expert-overlap"]
FP8_PADDING = [*MOE, "--fp8-format", "e4m3", "--moe-router-padding-for-quantization"]


def whole(argv: list[str], values: dict[str, Any]) -> list[tuple]:
    """Every problem of ``DENSE + argv`` parsed, with ``values`` then set on the namespace, as
    (plugin, message without the common ending, flags, hint)."""
    from megaplug.megatron import ConfigError, parse_args, validate_args

    args = parse_args(argv=[*DENSE, *argv], environ=dict(ENVIRON))
    for name, value in values.items():
        setattr(args, name, value)
    try:
        validate_args(args, {}, environ=dict(ENVIRON), target=target(), preflight=True,
                      torch_types=False)
    except ConfigError as error:
        return listed(error.problems)
    return []


def not_positive(shown: str) -> tuple:
    return pre(f"{shown} must be a positive integer", ("--mhc-recompute-layer-num",),
               "use 1 or more")


@pytest.mark.parametrize("every, expected", [
    # a bool is an int to Python, and True is not below 1: only the bool test rejects it;
    # a flag set to True shows as the bare flag
    (True, [not_positive("--mhc-recompute-layer-num")]),
    (False, [not_positive("--mhc-recompute-layer-num")]),
    (2.5, [not_positive("--mhc-recompute-layer-num 2.5")]),
    (1, []),
    (2, []),
])
def test_mhc_recompute_layer_num_is_a_positive_int(every, expected):
    assert whole(MHC_RECOMPUTED, {"mhc_recompute_layer_num": every}) == expected


@pytest.mark.parametrize("backend, expected", [
    # a backend Megatron does not know has no kernel packages to look for
    ("flashmla", []),
    ("tilelang", [pre("--dsa-kernel-backend tilelang needs tilelang, not installed",
                      ("--dsa-kernel-backend",),
                      "install the kernel packages, or use --dsa-kernel-backend none")]),
])
def test_dsa_kernel_backend_outside_the_choices(backend, expected):
    assert whole(DSA, {"dsa_kernel_backend": backend}) == expected


def shared_overlap_needs_all_to_all(dispatcher: str) -> tuple:
    return pre("--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex, "
               f"got {dispatcher}", ("--moe-shared-expert-overlap", "--moe-token-dispatcher-type"),
               "use the alltoall dispatcher, or drop --moe-shared-expert-overlap")


@pytest.mark.parametrize("dispatcher, expected", [
    ("alltoall_seq", [shared_overlap_needs_all_to_all("alltoall_seq")]),
    ("allgather", [shared_overlap_needs_all_to_all("allgather")]),
    ("flex", []),
    ("alltoall", []),
])
def test_shared_expert_overlap_names_the_dispatcher_set(dispatcher, expected):
    assert whole(SHARED_EXPERT_OVERLAP, {"moe_token_dispatcher_type": dispatcher}) == expected


def padding_needs_all_to_all(dispatcher: str) -> tuple:
    return pre("--moe-router-padding-for-quantization does not work with "
               f"--moe-token-dispatcher-type {dispatcher}",
               ("--moe-router-padding-for-quantization", "--moe-token-dispatcher-type"),
               "use --moe-token-dispatcher-type alltoall or flex")


@pytest.mark.parametrize("dispatcher, expected", [
    # the rule refuses Megatron's retired sequence all-to-all as it refuses allgather, and
    # names the dispatcher that was set
    ("alltoall_seq", [padding_needs_all_to_all("alltoall_seq")]),
    ("allgather", [padding_needs_all_to_all("allgather")]),
    ("alltoall", []),
])
def test_router_padding_refuses_the_sequence_all_to_all(dispatcher, expected):
    assert whole(FP8_PADDING, {"moe_token_dispatcher_type": dispatcher}) == expected


NEEDS_MHC = pre("--recompute-modules mhc needs --enable-mhc-connections",
                ("--recompute-modules", "--enable-mhc-connections"),
                "add --enable-mhc-connections")
ALL_MODULES = ("core_attn, gdn_norm_out, gdp_in_proj, gdp_qkv, layernorm, mhc, mla_up_proj, mlp, "
               "moe, moe_act, shared_experts")


@pytest.mark.parametrize("modules, expected", [
    # --recompute-modules takes a list; a bare string set on the namespace is one module
    ("mhc", [NEEDS_MHC]),
    (["mhc"], [NEEDS_MHC]),
    ("gdp", [pre("unknown --recompute-modules: gdp", ("--recompute-modules",),
                 f"choose from {ALL_MODULES}")]),
    ("core_attn", []),
])
def test_a_single_recompute_module_set_as_a_string(modules, expected):
    assert whole(["--recompute-granularity", "selective"],
                 {"recompute_modules": modules}) == expected


DSA_CP_NEEDS_ALL_GATHER = pre(
    "DeepSeek sparse attention (DSA) with context parallelism supports only --cp-comm-type "
    "all_gather, got a2a", ("--cp-comm-type", "--context-parallel-size"),
    "use --cp-comm-type all_gather")


@pytest.mark.parametrize("kind, expected", [
    # --cp-comm-type takes a list; a bare string set on the namespace is one type for all
    # layers, as Megatron's TransformerConfig takes it
    ("a2a", [DSA_CP_NEEDS_ALL_GATHER]),
    (["a2a"], [DSA_CP_NEEDS_ALL_GATHER]),
    ("allgather", []),
    (["allgather"], []),
])
def test_a_single_cp_comm_type_set_as_a_string(kind, expected):
    # only pre-flight's problems: the parallel plugin reads a bare string letter by letter
    found = whole([*DSA, "--context-parallel-size", "2"], {"cp_comm_type": kind})
    assert [p for p in found if p[0] == "preflight"] == expected
