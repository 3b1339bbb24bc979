"""FP8 rules at their boundaries: each problem whole and the near miss that must pass.

Megatron (``TransformerConfig.__post_init__``): with FP8 and ``--first-last-layers-bf16``,
each end keeps between 0 and ``num_layers // pipeline size`` layers in BF16 (both ends
inclusive); a custom recipe needs its quantizer factory.
"""

from __future__ import annotations

import pytest
from preflight_launches import ENVIRON, every_problem as whole, target

import megaplug

FP8 = ["--fp8-format", "e4m3", "--fp8-recipe", "tensorwise"]
EDGES = [*FP8, "--first-last-layers-bf16"]



def edge_problem(end: str, count: int, per_stage: int) -> tuple:
    return ("preflight", f"--num-layers-at-{end}-in-bf16 {count} must be between 0 and the "
            f"{per_stage} layers of a pipeline stage",
            (f"--num-layers-at-{end}-in-bf16", "--num-layers", "--pipeline-model-parallel-size"),
            f"keep at most {per_stage} layers in BF16 at each end")


@pytest.mark.parametrize("argv, expected", [
    # 8 layers on one stage: 0 and 8 are the ends of the range, 9 is past it
    ([*EDGES, "--num-layers-at-start-in-bf16", "0", "--num-layers-at-end-in-bf16", "8"], []),
    ([*EDGES, "--num-layers-at-start-in-bf16", "8", "--num-layers-at-end-in-bf16", "0"], []),
    ([*EDGES, "--num-layers-at-end-in-bf16", "9"], [edge_problem("end", 9, 8)]),
    ([*EDGES, "--num-layers-at-start-in-bf16", "9"], [edge_problem("start", 9, 8)]),
    # the counts mean nothing without both FP8 and --first-last-layers-bf16
    ([*FP8, "--num-layers-at-start-in-bf16", "9"], []),
    (["--first-last-layers-bf16", "--num-layers-at-start-in-bf16", "9"], []),
    # a custom recipe with its factory
    (["--fp8-format", "e4m3", "--fp8-recipe", "custom", "--fp8-quantizer-factory",
      "pkg.mod.fn"], []),
    (["--fp8-format", "e4m3", "--fp8-recipe", "custom"],
     [("preflight", "--fp8-recipe custom needs --fp8-quantizer-factory",
       ("--fp8-recipe", "--fp8-quantizer-factory"),
       "name the factory's import path with --fp8-quantizer-factory package.module.function")]),
])
def test_precision_rule_whole(argv: list[str], expected: list[tuple]) -> None:
    assert whole(argv) == expected


def test_edge_layer_counts_are_not_held_against_an_unknown_stage_size():
    # the model plugin blocked: no plugin declares --num-layers, so a stage's size is unknown
    # and there is nothing to hold the BF16 edge layers against (not a stage of 0 layers)
    argv = ["-p", "no:model", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
            "--seq-length", "128", *EDGES, "--num-layers-at-start-in-bf16", "1"]
    try:
        megaplug.resolve(argv, environ=dict(ENVIRON), target=target())
    except megaplug.ConfigError as error:
        assert [str(p) for p in error.problems if p.plugin == "preflight"] == []
