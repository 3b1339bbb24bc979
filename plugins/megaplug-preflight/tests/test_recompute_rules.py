"""Activation recomputation and CPU offloading at the boundaries they draw (TransformerConfig
.__post_init__'s recomputation checks): each rejection whole (message, flags, hint), and the
near misses that must pass."""

from __future__ import annotations


import pytest
from preflight_launches import (
    AT_MODEL_BUILD,
    DENSE,
    ENVIRON,
    MOE,
    every_problem as whole,
    pre,
    target,
)


SELECTIVE = ["--recompute-granularity", "selective", "--recompute-modules"]
ALL_MODULES = ("core_attn, gdn_norm_out, gdp_in_proj, gdp_qkv, layernorm, mhc, mla_up_proj, mlp, "
               "moe, moe_act, shared_experts")




def offloads_too_many(count: int, layers: int, at_most: int) -> tuple:
    return pre(f"--cpu-offloading-num-layers {count} must be below --num-layers {layers}",
               ("--cpu-offloading-num-layers", "--num-layers"), f"offload at most {at_most} layers")


NO_LAYERS = pre("--num-layers 0 must be at least 1", ("--num-layers",),
                "give the model at least one layer")
_LAYERS_AT = DENSE.index("--num-layers")
WITHOUT_LAYER_COUNT = DENSE[:_LAYERS_AT] + DENSE[_LAYERS_AT + 2:]


@pytest.mark.parametrize("base, argv, expected", [
    (DENSE, ["--cpu-offloading-num-layers", "7"], []),
    (DENSE, ["--cpu-offloading-num-layers", "8"], [offloads_too_many(8, 8, 7)]),
    (DENSE, ["--num-layers", "1", "--cpu-offloading-num-layers", "1"],
     [offloads_too_many(1, 1, 0)]),
    (DENSE, ["--num-layers", "0", "--cpu-offloading-num-layers", "1"],
     [NO_LAYERS, offloads_too_many(1, 0, 0)]),
    # validate_args refuses a model without a layer count; pre-flight still counts it as 0
    (WITHOUT_LAYER_COUNT, ["--cpu-offloading-num-layers", "1"],
     [("model", "the number of layers is not set", ("--num-layers", "--encoder-num-layers"),
       "add --num-layers N (or --encoder-num-layers N for encoder-decoder models)"),
      offloads_too_many(1, 0, 0)]),
])
def test_cpu_offloading_moves_fewer_layers_than_the_model_has(base, argv, expected):
    assert whole(argv, base=base) == expected


@pytest.mark.parametrize("argv, expected", [
    (["--recompute-granularity", "selective", "--recompute-modules", "core_attn", "gdp", "mlp",
      "attn"],
     [pre("unknown --recompute-modules: gdp, attn", ("--recompute-modules",),
          f"choose from {ALL_MODULES}")]),
    (["--recompute-granularity", "selective", "--recompute-modules", "core_attn", "mlp",
      "layernorm"], []),
])
def test_recompute_modules_are_known(argv, expected):
    assert whole(argv) == expected


def delayed(modules: str) -> tuple:
    return pre(f"--recompute-modules {modules} does not work with --fp8-recipe delayed",
               ("--recompute-modules", "--fp8-recipe"),
               "use another FP8 recipe, or drop these modules")


def old_te(what: str, found: str) -> tuple:
    return pre(f"recomputing {what} in FP8 requires transformer_engine >= 2.6.0dev0, found "
               f"{found}", ("--recompute-modules", "--fp8-format"), "upgrade Transformer Engine")


FP8_MOE = [*MOE, "--moe-grouped-gemm", "--fp8-format", "e4m3", "--fp8-recipe"]


@pytest.mark.parametrize("te, argv, expected", [
    ("2.17.1", [*FP8_MOE, "delayed", *SELECTIVE, "layernorm", "moe_act"],
     [delayed("moe_act layernorm")]),
    ("2.17.1", [*FP8_MOE, "delayed", *SELECTIVE, "moe_act", "core_attn"], [delayed("moe_act")]),
    ("2.17.1", [*FP8_MOE, "tensorwise", *SELECTIVE, "moe_act", "layernorm"], []),
    ("2.17.1", [*FP8_MOE, "delayed", *SELECTIVE, "core_attn"], []),
    ("2.5.0", [*FP8_MOE, "tensorwise", *SELECTIVE, "layernorm", "moe_act"],
     [old_te("moe_act and layernorm", "2.5.0")]),
    ("2.5.0", [*FP8_MOE, "delayed", *SELECTIVE, "moe_act"],
     [delayed("moe_act"), old_te("moe_act", "2.5.0")]),
    ("2.6.0", [*FP8_MOE, "tensorwise", *SELECTIVE, "layernorm", "moe_act"], []),
])
def test_fp8_activations_and_norms_recompute_with_current_scaling(te, argv, expected):
    assert whole(argv, {"transformer_engine": te}) == expected


def test_without_the_parallel_plugin_cpu_offloading_has_one_pipeline_stage():
    # the pipeline size is the parallel plugin's setting: blocked, there is one stage
    assert whole(["-p", "no:parallel", "--cpu-offloading-num-layers", "1"]) == []
    assert whole(["-p", "no:parallel", "--cpu-offloading-num-layers", "1",
                  "--recompute-activations"]) == [
        pre("--cpu-offloading-num-layers does not work with activation recomputation "
            "(--recompute-granularity selective)",
            ("--cpu-offloading-num-layers", "--recompute-granularity"),
            "drop the recomputation flags, or CPU offloading")]


#: A launch with the model plugin blocked: no plugin declares --num-layers, so a stage's
#: layer count is unknown.
NO_MODEL = ["-p", "no:model", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
            "--seq-length", "128"]



def test_full_recompute_without_a_count_while_the_layer_count_is_unknown():
    [(_, message, flags, hint)] = [
        problem for problem in whole([*NO_MODEL, "--recompute-granularity", "full",
                                      "--recompute-method", "uniform"], base=[])
        if problem[0] == "preflight"]
    assert message.startswith("--recompute-granularity full needs --recompute-num-layers")
    assert flags == ("--recompute-granularity", "--recompute-num-layers")
    assert hint == "add --recompute-num-layers N, N 1 or more"


GRANULARITY_NOT_KNOWN = ("--recompute-granularity bogus must be full or selective",
                         ("--recompute-granularity",), "use full or selective")
METHOD_NOT_KNOWN = ("--recompute-method sideways must be block or uniform",
                    ("--recompute-method",), "use block or uniform")


@pytest.mark.parametrize("granularity, method, count, expected", [
    ("bogus", "sideways", 1, [GRANULARITY_NOT_KNOWN, METHOD_NOT_KNOWN]),
    ("full", "sideways", 1, [METHOD_NOT_KNOWN]),
    ("bogus", None, 1, [GRANULARITY_NOT_KNOWN,
                        ("--recompute-granularity bogus needs --recompute-method block or "
                         "uniform", ("--recompute-granularity", "--recompute-method"),
                         "add --recompute-method uniform (or block)")]),
    ("full", "uniform", 1, []),
    ("full", "block", 1, []),
    ("selective", None, None, []),
])
def test_values_megatron_code_sets_on_the_namespace(granularity, method, count, expected):
    # the flags' choices hold what a command line, file or default may say; Megatron code
    # may still set any value on the namespace before validate_args
    from megaplug.megatron import ConfigError, parse_args, validate_args

    args = parse_args(argv=[*DENSE])
    args.recompute_granularity, args.recompute_method = granularity, method
    args.recompute_num_layers = count
    try:
        validate_args(args, {}, environ=dict(ENVIRON), target=target(), preflight=True,
                      torch_types=False)
    except ConfigError as error:
        found = [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
                 for p in error.problems]
    else:
        found = []
    assert found == expected
