"""Fine-grained activation offloading, the MoE paged stash, GatedDeltaProduct recompute range
and GTP rematerialization: each rejection whole (message, flags, hint) at the boundary it
draws, and the near misses that must pass (TransformerConfig.__post_init__'s offloading
block)."""

from __future__ import annotations

import pytest
from preflight_launches import MOE, every_problem as whole, pre


FINE = ["--fine-grained-activation-offloading", "--offload-modules"]
FUSER = "--use-transformer-engine-op-fuser"
#: A paged-stash launch that every other rule accepts: HybridEP with a rank capacity factor.
STASH = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
         "flex", "--moe-flex-dispatcher-backend", "hybridep", "--expert-model-parallel-size", "2",
         "--disable-bias-linear", FUSER, "--moe-paged-stash",
         "--moe-expert-rank-capacity-factor", "1.5"]
ALL_MODULES = ("attn_norm, attn_proj, core_attn, expert_fc1, fused_group_mlp, gdp_qkv, "
               "mlp_norm, moe_act, qkv_linear")
WHOLE_MOE = ("does not work while whole MoE layers are recomputed (moe in --recompute-modules "
             "or --moe-layer-recompute)")
WHOLE_MOE_HINT = "remove moe from the recomputed modules, or these from --offload-modules"




def fused_covers(partial: str) -> tuple:
    return pre(f"--offload-modules fused_group_mlp already covers {partial}",
               ("--offload-modules",), f"remove {partial}")


NEEDS_FUSER = pre("--offload-modules fused_group_mlp needs --use-transformer-engine-op-fuser",
                  ("--offload-modules", FUSER), "add --use-transformer-engine-op-fuser")
WITH_CPU = pre("--fine-grained-activation-offloading does not work with "
               "--cpu-offloading-num-layers",
               ("--fine-grained-activation-offloading", "--cpu-offloading-num-layers"),
               "use one of the two offloading schemes")


@pytest.mark.parametrize("module", ALL_MODULES.replace("attn_proj, ", "").split(", "))
def test_every_known_module_may_be_offloaded_alone(module):
    extra = [*MOE, FUSER] if module == "fused_group_mlp" else []
    assert whole([*FINE, module, *extra]) == []


@pytest.mark.parametrize("argv, expected", [
    # no fine-grained offloading: nothing of it is read
    (["--offload-modules", "bogus", "attn_proj", "--cpu-offloading-num-layers", "1"], []),
    ([*FINE, "core_attn", "--cpu-offloading-num-layers", "1"], [WITH_CPU]),
    ([*FINE, "core_attn", "--cpu-offloading-num-layers", "0"], []),
    (["--fine-grained-activation-offloading"],
     [pre("--fine-grained-activation-offloading needs --offload-modules",
          ("--fine-grained-activation-offloading", "--offload-modules"),
          "name the activations to offload, e.g. --offload-modules core_attn attn_proj")]),
    # every problem at once, unknown modules in the order given
    ([*FINE, "qkv_linear", "bogus", "core_attn", "other", "--cpu-offloading-num-layers", "2"],
     [WITH_CPU, pre("unknown --offload-modules: bogus, other", ("--offload-modules",),
                    f"choose from {ALL_MODULES}")]),
])
def test_fine_grained_offloading_names_known_modules_alone(argv, expected):
    assert whole(argv) == expected


ATTN_PROJ_ALONE = pre("--offload-modules attn_proj needs core_attn offloaded too",
                      ("--offload-modules",), "add core_attn to --offload-modules")


@pytest.mark.parametrize("argv, expected", [
    ([*FINE, "attn_proj"], [ATTN_PROJ_ALONE]),
    ([*FINE, "attn_proj", "qkv_linear"], [ATTN_PROJ_ALONE]),
    ([*FINE, "attn_proj", "core_attn"], []),
    ([*FINE, "core_attn", "attn_proj"], []),
    (["--offload-modules", "attn_proj"], []),
])
def test_attention_projection_is_offloaded_with_core_attention(argv, expected):
    assert whole(argv) == expected


SELECTIVE = ["--recompute-granularity", "selective", "--recompute-modules"]
FULL = ["--recompute-granularity", "full", "--recompute-method", "uniform",
        "--recompute-num-layers", "1", "--recompute-modules"]
GDP_CONFLICT = pre("--offload-modules gdp_qkv does not work with --recompute-modules gdp_in_proj "
                   "(the recomputation discards what would be offloaded)",
                   ("--offload-modules", "--recompute-modules"), "drop one of the two")


@pytest.mark.parametrize("argv, expected", [
    ([*FINE, "gdp_qkv", *SELECTIVE, "gdp_in_proj"], [GDP_CONFLICT]),
    ([*FINE, "core_attn", "gdp_qkv", *SELECTIVE, "core_attn", "gdp_in_proj"], [GDP_CONFLICT]),
    ([*FINE, "core_attn", *SELECTIVE, "gdp_in_proj"], []),
    ([*FINE, "gdp_qkv", *SELECTIVE, "core_attn"], []),
    # only selective recomputation keeps its modules' inputs out
    ([*FINE, "gdp_qkv", *FULL, "gdp_in_proj"], []),
    (["--offload-modules", "gdp_qkv", *SELECTIVE, "gdp_in_proj"], []),
    # whole MoE layers recomputed: nothing inside them may be offloaded, named in this order
    ([*MOE, *FINE, "expert_fc1", "core_attn", "moe_act", *SELECTIVE, "moe"],
     [pre(f"--offload-modules moe_act expert_fc1 {WHOLE_MOE}",
          ("--offload-modules", "--recompute-modules"), WHOLE_MOE_HINT)]),
    ([*MOE, *FINE, "expert_fc1", "--moe-layer-recompute"],
     [pre(f"--offload-modules expert_fc1 {WHOLE_MOE}",
          ("--offload-modules", "--recompute-modules"), WHOLE_MOE_HINT)]),
    ([*MOE, *FINE, "fused_group_mlp", FUSER, *SELECTIVE, "moe"],
     [pre(f"--offload-modules fused_group_mlp {WHOLE_MOE}",
          ("--offload-modules", "--recompute-modules"), WHOLE_MOE_HINT)]),
    ([*MOE, *FINE, "core_attn", "gdp_qkv", *SELECTIVE, "moe", "gdp_in_proj"], [GDP_CONFLICT]),
    ([*MOE, *FINE, "moe_act", *SELECTIVE, "core_attn"], []),
    ([*MOE, *FINE, "core_attn", *SELECTIVE, "moe"], []),
    ([*MOE, *FINE, "moe_act", *FULL, "moe"], []),
    ([*MOE, "--offload-modules", "moe_act", *SELECTIVE, "moe"], []),
])
def test_offloading_and_recomputation_do_not_overlap(argv, expected):
    assert whole(argv) == expected


def negative(flag: str, value: str) -> tuple:
    return pre(f"{flag} {value} must not be negative", (flag,), "use 0 or more")


def fraction(value: str) -> tuple:
    return pre(f"--activation-offload-fraction {value} must be between 0 and 1",
               ("--activation-offload-fraction",), "use a fraction in [0, 1]")


@pytest.mark.parametrize("settings, expected", [
    (["--min-offloaded-tensor-size", "-1"], [negative("--min-offloaded-tensor-size", "-1")]),
    (["--min-offloaded-tensor-size", "0"], []),
    (["--delta-offload-bytes-across-pp-ranks", "-1"],
     [negative("--delta-offload-bytes-across-pp-ranks", "-1")]),
    (["--delta-offload-bytes-across-pp-ranks", "0"], []),
    (["--activation-offload-fraction", "-0.01"], [fraction("-0.01")]),
    (["--activation-offload-fraction", "0"], []),
    (["--activation-offload-fraction", "1"], []),
    (["--activation-offload-fraction", "1.01"], [fraction("1.01")]),
    (["--min-offloaded-tensor-size", "-2", "--delta-offload-bytes-across-pp-ranks", "-3",
      "--activation-offload-fraction", "2"],
     [negative("--min-offloaded-tensor-size", "-2"),
      negative("--delta-offload-bytes-across-pp-ranks", "-3"), fraction("2.0")]),
])
def test_offloading_amounts_are_in_range(settings, expected):
    assert whole([*FINE, "core_attn", *settings]) == expected


def test_offloading_amounts_are_not_read_without_fine_grained_offloading():
    assert whole(["--min-offloaded-tensor-size", "-2", "--delta-offload-bytes-across-pp-ranks",
                  "-3", "--activation-offload-fraction", "2"]) == []


@pytest.mark.parametrize("argv, expected", [
    ([*FINE, "fused_group_mlp"], [NEEDS_FUSER]),
    ([*FINE, "fused_group_mlp", FUSER], []),
    ([*FINE, "core_attn", FUSER], []),
    ([*FINE, "fused_group_mlp", "expert_fc1"], [NEEDS_FUSER, fused_covers("expert_fc1")]),
    ([*FINE, "moe_act", "fused_group_mlp", FUSER], [fused_covers("moe_act")]),
    ([*FINE, "moe_act", "fused_group_mlp", "expert_fc1", FUSER],
     [fused_covers("expert_fc1 and moe_act")]),
    ([*FINE, "moe_act", "expert_fc1"], []),
    (["--offload-modules", "fused_group_mlp", "expert_fc1"], []),
])
def test_fused_group_mlp_is_offloaded_whole_from_the_op_fuser(argv, expected):
    assert whole([*MOE, *argv]) == expected


def stash_conflict(modules: str) -> tuple:
    return pre(f"--moe-paged-stash already stashes what --offload-modules {modules} would "
               "offload", ("--moe-paged-stash", "--offload-modules"), f"remove {modules}")


STASH_WITH_CPU = pre("--moe-paged-stash does not work with --cpu-offloading-num-layers",
                     ("--moe-paged-stash", "--cpu-offloading-num-layers"), "drop one of the two")
STASH_NEEDS_FACTOR = pre("--moe-paged-stash needs --moe-expert-rank-capacity-factor",
                         ("--moe-paged-stash", "--moe-expert-rank-capacity-factor"),
                         "set --moe-expert-rank-capacity-factor")


@pytest.mark.parametrize("argv, expected", [
    (STASH, []),
    ([*STASH, "--cpu-offloading-num-layers", "1"], [STASH_WITH_CPU]),
    ([*STASH, "--cpu-offloading-num-layers", "0"], []),
    ([*MOE, "--moe-paged-stash"], [STASH_NEEDS_FACTOR]),
    ([*MOE, "--moe-paged-stash", "--cpu-offloading-num-layers", "3"],
     [STASH_WITH_CPU, STASH_NEEDS_FACTOR]),
    ([*STASH, "--offload-modules", "core_attn", "moe_act"], [stash_conflict("moe_act")]),
    ([*STASH, "--offload-modules", "core_attn", "attn_norm"], []),
    # named in the stash's order, whatever the order given
    ([*STASH, *FINE, "fused_group_mlp", "expert_fc1", "moe_act"],
     [fused_covers("expert_fc1 and moe_act"),
      stash_conflict("moe_act expert_fc1 fused_group_mlp")]),
    ([*MOE, "--offload-modules", "moe_act", "--cpu-offloading-num-layers", "1"], []),
])
def test_the_paged_stash_holds_expert_activations_by_itself(argv, expected):
    assert whole(argv) == expected


def chunk_states(value: str) -> tuple:
    return pre(f"--gdp-num-chunk-states-to-recompute {value} must be between 0 and 64",
               ("--gdp-num-chunk-states-to-recompute", "--gdp-cutedsl-kernel"),
               "use a value in [0, 64]")


@pytest.mark.parametrize("argv, expected", [
    (["--gdp-cutedsl-kernel", "--gdp-num-chunk-states-to-recompute", "-1"], [chunk_states("-1")]),
    (["--gdp-cutedsl-kernel", "--gdp-num-chunk-states-to-recompute", "0"], []),
    (["--gdp-cutedsl-kernel", "--gdp-num-chunk-states-to-recompute", "64"], []),
    (["--gdp-cutedsl-kernel", "--gdp-num-chunk-states-to-recompute", "65"], [chunk_states("65")]),
    (["--gdp-cutedsl-kernel"], []),
    (["--gdp-num-chunk-states-to-recompute", "65"], []),
    (["--gdp-num-chunk-states-to-recompute", "-1"], []),
])
def test_gated_delta_product_recomputes_0_to_64_chunk_states(argv, expected):
    assert whole(argv) == expected


@pytest.mark.parametrize("argv, expected", [
    (["--gtp-remat-opt-in-modules", "moe_latent_proj"], []),
    (["--gtp-remat-opt-in-modules", "attn", "moe_latent_proj", "mlp"],
     [pre("unknown --gtp-remat-opt-in-modules: attn, mlp", ("--gtp-remat-opt-in-modules",),
          "choose from moe_latent_proj")]),
])
def test_gtp_rematerialization_opts_in_known_modules(argv, expected):
    assert whole(argv) == expected
