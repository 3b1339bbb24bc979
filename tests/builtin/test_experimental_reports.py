"""What each experimental rule reports, whole: the message, every flag it names and the hint;
every warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import ENV, problems, resolve  # noqa: E402

from megaplug import TorchDType  # noqa: E402

P = "--hybrid-layer-pattern"
PP2 = ["--pipeline-model-parallel-size", "2"]
WORLD2 = {**ENV, "WORLD_SIZE": "2"}
LEGACY_MTP = ("--mtp-hybrid-override-pattern is deprecated and kept only to load old "
              "checkpoints; write MTP depths into --hybrid-layer-pattern after '/', e.g. "
              "'M*M*/MM/MM' (two depths of 'MM')", ("--mtp-hybrid-override-pattern",))
SEGMENTS = "stages are the pattern's '|' segments"


def whole(argv, **kwargs) -> list[tuple]:
    return [(p.message, tuple(p.flags), p.hint) for p in problems(argv, **kwargs)]


def warned(resolved) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings]


def provenance(resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, env, expected", [
    ([P, "M*", "--hybrid-override-pattern", "M-"], None,
     [("--hybrid-override-pattern and --hybrid-layer-pattern cannot both be given",
       ("--hybrid-override-pattern", "--hybrid-layer-pattern"),
       "keep --hybrid-layer-pattern; --hybrid-override-pattern is deprecated")]),
    ([P, "MX"], None,
     [("--hybrid-layer-pattern 'MX': the main pattern has unknown layer symbol 'X' at position "
       "1; known symbols: M (Mamba), G (gated delta net), * (attention), D (DeepSeek sparse "
       "attention), + (multi-latent attention), - (MLP), E (mixture of experts)",
       ("--hybrid-layer-pattern",),
       "use M, G, *, D, - and E for layers, '|' between pipeline segments and '/' before each "
       "MTP depth")]),
    ([P, "M*|M*|M*", *PP2], WORLD2,
     [("--hybrid-layer-pattern has 3 pipeline segments, which is not a multiple of "
       "--pipeline-model-parallel-size 2",
       ("--hybrid-layer-pattern", "--pipeline-model-parallel-size"),
       "split the pattern with '|' into a multiple of 2 segments")]),
    ([P, "M*|M*", "--decoder-first-pipeline-num-layers", "1", *PP2], WORLD2,
     [("--decoder-first-pipeline-num-layers cannot be used with a --hybrid-layer-pattern that "
       "has '|' pipeline segments",
       ("--decoder-first-pipeline-num-layers", "--hybrid-layer-pattern"),
       "drop it; the '|' segments already place the layers")]),
    ([P, "M*|M*", "--decoder-last-pipeline-num-layers", "1", *PP2], WORLD2,
     [("--decoder-last-pipeline-num-layers cannot be used with a --hybrid-layer-pattern that "
       "has '|' pipeline segments",
       ("--decoder-last-pipeline-num-layers", "--hybrid-layer-pattern"),
       "drop it; the '|' segments already place the layers")]),
    (["--yaml-cfg", "m.yaml", "--triton-autotune-block-sizes", "BLOCK_M=64"], None,
     [("--yaml-cfg m.yaml is not supported", ("--yaml-cfg",),
       "write the settings as a flat YAML mapping of flag names and pass it with --config FILE"),
      ("--triton-autotune-block-sizes cannot be combined with --yaml-cfg",
       ("--triton-autotune-block-sizes", "--yaml-cfg"),
       "set the Triton autotune policy in the YAML configuration instead")]),
])
def test_each_problem_whole(argv, env, expected):
    assert whole(argv, env=env) == expected


@pytest.mark.parametrize("flag, why", [
    ("--account-for-embedding-in-pipeline-split", SEGMENTS),
    ("--account-for-loss-in-pipeline-split", SEGMENTS),
])
def test_a_layout_flag_contradicts_a_pattern_whole(flag, why):
    assert whole([P, "M*", flag]) == [
        (f"{flag} cannot be used with --hybrid-layer-pattern", (flag, "--hybrid-layer-pattern"),
         f"drop it; {why}")]


@pytest.mark.parametrize("flag, value, why", [
    ("--num-layers-per-virtual-pipeline-stage", "1",
     "describe a multiple of --pipeline-model-parallel-size segments with '|' instead"),
    ("--num-virtual-stages-per-pipeline-rank", "0",
     "virtual stages follow from the number of '|' segments"),
    ("--pipeline-model-parallel-layout", "Et*|t*L", SEGMENTS),
])
def test_a_pipeline_flag_contradicts_a_pattern_whole(flag, value, why):
    found = whole([P, "M*M*", flag, value, *PP2], env=WORLD2)
    assert [p for p in found if "--hybrid-layer-pattern" in p[1]] == [
        (f"{flag} cannot be used with --hybrid-layer-pattern", (flag, "--hybrid-layer-pattern"),
         f"drop it; {why}")]


def test_uneven_stages_go_with_a_pattern_without_pipes():
    resolved = resolve([P, "M*M*", "--decoder-first-pipeline-num-layers", "1", *PP2],
                       env=WORLD2)
    assert resolved.decoder_first_pipeline_num_layers == 1


def test_the_deprecated_pattern_spelling_whole():
    resolved = resolve(["--hybrid-override-pattern", "M-"])
    assert provenance(resolved, "hybrid_layer_pattern") == (
        "M-", "normalized", "deprecated spelling", ("hybrid_override_pattern",))
    assert warned(resolved) == [("--hybrid-override-pattern is deprecated; use "
                                 "--hybrid-layer-pattern", ("--hybrid-override-pattern",))]


def test_the_legacy_mtp_pattern_is_merged_whole():
    resolved = resolve(["--mtp-hybrid-override-pattern", "M*", "--mtp-num-layers", "2",
                        P, "M-M-"])
    assert provenance(resolved, "hybrid_layer_pattern") == (
        "M-M-/M*/M*", "normalized", "legacy MTP pattern appended as MTP depths",
        ("hybrid_layer_pattern", "mtp_hybrid_override_pattern", "mtp_num_layers"))
    assert provenance(resolved, "mtp_hybrid_override_pattern") == (
        None, "normalized", "merged into --hybrid-layer-pattern", ())
    assert warned(resolved) == [LEGACY_MTP]


@pytest.mark.parametrize("argv", [
    ["--mtp-hybrid-override-pattern", "M*"],
    ["--mtp-hybrid-override-pattern", "M*", "--mtp-num-layers", "0"],
    ["--mtp-hybrid-override-pattern", "M*", "--mtp-num-layers", "1", P, "M-/M*"],
])
def test_the_legacy_mtp_pattern_is_kept(argv):
    resolved = resolve(argv)
    assert resolved.mtp_hybrid_override_pattern == "M*"
    assert warned(resolved) == [LEGACY_MTP]


def test_the_legacy_mtp_pattern_alone_makes_a_pattern():
    resolved = resolve(["--mtp-hybrid-override-pattern", "M*", "--mtp-num-layers", "1"])
    assert provenance(resolved, "hybrid_layer_pattern")[:2] == ("/M*", "normalized")


def test_a_pattern_overriding_num_layers_whole():
    resolved = resolve([P, "M*M*", "--num-layers", "3"])
    assert provenance(resolved, "num_layers") == (
        4, "derived", "layers in the hybrid pattern", ("hybrid_layer_pattern",))
    assert warned(resolved) == [("ignoring --num-layers 3: --hybrid-layer-pattern has 4 layers",
                                 ("--num-layers", "--hybrid-layer-pattern"))]


def test_a_pattern_agreeing_with_num_layers_is_quiet():
    resolved = resolve([P, "M*M*", "--num-layers", "4"])
    assert resolved.source("num_layers").source == "command-line"
    assert warned(resolved) == []


@pytest.mark.parametrize("pattern, pp, world, virtual", [
    ("M*|M*|M*|M*", "2", "2", 2), ("M*|M*", "2", "2", None), ("M*M*", "2", "2", None),
    ("M*|M*|M*|M*", "4", "4", None), ("M*|M*|M*|M*|M*|M*|M*|M*", "4", "4", 2),
    ("M*", "1", "8", None),
])
def test_virtual_stages_from_pattern_segments(pattern, pp, world, virtual):
    resolved = resolve([P, pattern, "--pipeline-model-parallel-size", pp],
                       env={**ENV, "WORLD_SIZE": world})
    assert provenance(resolved, "virtual_pipeline_model_parallel_size") == (
        virtual, "derived", "pipeline segments of the hybrid pattern",
        ("hybrid_layer_pattern", "pipeline_model_parallel_size"))


def test_mtp_depths_overriding_mtp_num_layers_whole():
    resolved = resolve([P, "M*/M-/M-", "--mtp-num-layers", "1"])
    assert provenance(resolved, "mtp_num_layers") == (
        2, "derived", "MTP depths in the hybrid pattern", ("hybrid_layer_pattern",))
    assert warned(resolved) == [
        ("--mtp-num-layers 1 disagrees with the 2 MTP depths of --hybrid-layer-pattern; using 2",
         ("--mtp-num-layers", "--hybrid-layer-pattern"))]


def test_mtp_depths_filling_mtp_num_layers_are_quiet():
    resolved = resolve([P, "M*/M-/M-"])
    assert resolved.mtp_num_layers == 2
    assert warned(resolved) == []


def test_optimizer_dtypes_provenance():
    resolved = resolve(["--main-grads-dtype", "bf16", "--use-precision-aware-optimizer",
                        "--exp-avg-dtype", "fp16"])
    assert provenance(resolved, "main_grads_dtype") == (
        TorchDType("bfloat16"), "derived", "", ("main_grads_dtype",))
    assert provenance(resolved, "exp_avg_dtype") == (
        TorchDType("float16"), "derived", "", ("exp_avg_dtype",))
    assert warned(resolved) == []


@pytest.mark.parametrize("argv, expected", [
    (["--main-params-dtype", "fp16", "--exp-avg-sq-dtype", "bf16"],
     [("--main-params-dtype, --exp-avg-sq-dtype take effect only with "
       "--use-precision-aware-optimizer",
       ("--main-params-dtype", "--exp-avg-sq-dtype", "--use-precision-aware-optimizer"))]),
    (["--main-grads-dtype", "bf16"], []),
])
def test_lower_precision_optimizer_state_whole(argv, expected):
    assert warned(resolve(argv)) == expected


def test_without_the_parallel_plugin_a_pattern_sets_no_pipeline():
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
    from megaplug.builtin import experimental

    kernel = Kernel(PluginSet(PluginSelection(autoload=False), builtins=[experimental]))
    resolved = kernel.resolve([P, "M*|M*"], environ={})
    assert resolved.hybrid_layer_pattern == "M*|M*"
    assert "virtual_pipeline_model_parallel_size" not in resolved


def test_virtual_stages_are_a_whole_number():
    resolved = resolve([P, "M*|M*|M*|M*", *PP2], env=WORLD2)
    assert type(resolved.virtual_pipeline_model_parallel_size) is int


def test_a_pattern_without_mtp_has_zero_depths():
    from megaplug.builtin.experimental.hybrid import parse_hybrid_pattern

    assert parse_hybrid_pattern("M*M*").mtp_depths == 0


def test_a_pipe_in_the_mtp_pattern_whole():
    assert whole([P, "M*/M|*"]) == [
        ("--hybrid-layer-pattern 'M*/M|*': the MTP pattern may not contain '|' (position 1); "
         "pipeline segments belong to the main pattern", ("--hybrid-layer-pattern",),
         "use M, G, *, D, - and E for layers, '|' between pipeline segments and '/' before each "
         "MTP depth")]


@pytest.mark.parametrize("text, parsed", [("BLOCK_M=1", ("BLOCK_M", 1)),
                                          ("BLOCK_SIZE=2", ("BLOCK_SIZE", 2))])
def test_the_smallest_block_sizes(text, parsed):
    from megaplug.builtin.experimental.converters import parse_block_size

    assert parse_block_size(text) == parsed


def test_a_bad_block_size_says_what_is_expected():
    from megaplug.builtin.experimental.converters import parse_block_size

    with pytest.raises(ValueError) as info:
        parse_block_size("BLOCK_M=0")
    assert str(info.value) == "expected BLOCK_NAME=positive_integer, e.g. BLOCK_SIZE=128"
