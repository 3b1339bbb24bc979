"""The experimental plugin: hybrid layer patterns, optimizer dtypes, YAML configs, Triton."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import ENV, messages, problems, resolve, warnings_of  # noqa: E402

import megaplug  # noqa: E402
from megaplug.testing import MINIMAL_ARGV  # noqa: E402
from megaplug.values._encoding import encode  # noqa: E402
from megaplug.builtin.experimental.hybrid import (  # noqa: E402
    HybridPatternError,
    parse_hybrid_pattern,
    unified_pattern,
)
from megaplug.builtin.experimental.options import parse_block_size  # noqa: E402

PATTERN4 = "M-M-M-M*-M-|M-M-M*-M-M-|M-M*-M-M-M-|M*-M-M-M-M-"
WORLD4 = {**ENV, "WORLD_SIZE": "4"}


# -- the pattern language ------------------------------------------------------------------------


def test_pattern_layers_segments_and_mtp_depths():
    pattern = parse_hybrid_pattern("MEMEM*EMEMEM*E/*E/*E")
    assert (pattern.layer_count, pattern.pipeline_segments) == (14, 1)
    assert (pattern.mtp, pattern.mtp_depths) == ("*E", 2)
    piped = parse_hybrid_pattern(PATTERN4)
    assert (piped.layer_count, piped.pipeline_segments, piped.has_pipes) == (44, 4, True)
    assert parse_hybrid_pattern("M*").mtp is None
    # '+' is a multi-latent attention layer, as in Megatron's pattern symbols
    assert parse_hybrid_pattern("M+M+/+-").layer_count == 4


@pytest.mark.parametrize("text, message", [
    ("M*X", "unknown layer symbol 'X' at position 2"),
    ("M*/M*/MM", "all MTP depths must repeat one pattern"),
    ("M*/M|*", "the MTP pattern may not contain '|'"),
    ("M*//", "MTP depth 1 is empty"),
])
def test_malformed_patterns(text, message):
    with pytest.raises(HybridPatternError, match=message.replace("*", r"\*").replace("|", r"\|")):
        parse_hybrid_pattern(text)


def test_unified_pattern_repeats_the_legacy_mtp_pattern():
    assert unified_pattern("M*M*", "MM", 2) == "M*M*/MM/MM"
    assert unified_pattern(None, "MM", 1) == "/MM"


# -- hybrid pattern derivations ------------------------------------------------------------------


def test_mla_layers_count_like_any_layer():
    assert resolve(["--hybrid-layer-pattern", "M+M+M+M+"]).num_layers == 8


def test_pattern_sets_the_number_of_layers():
    resolved = resolve(["--hybrid-layer-pattern", "M-M*-M-"])
    assert resolved.num_layers == 7
    assert resolved.source("num_layers").plugin == "experimental"


def test_pattern_overrides_a_different_num_layers_with_a_warning():
    resolved = resolve(["--hybrid-layer-pattern", "M-M*-M-", "--num-layers", "12"])
    assert resolved.num_layers == 7
    assert any("ignoring --num-layers 12" in w for w in warnings_of(resolved))
    assert warnings_of(resolve(["--hybrid-layer-pattern", "M-M*-M-", "--num-layers", "7"])) == []


def test_one_segment_per_pipeline_rank_is_no_interleaving():
    resolved = resolve(["--hybrid-layer-pattern", PATTERN4, "--pipeline-model-parallel-size", "4"])
    assert resolved.virtual_pipeline_model_parallel_size is None
    assert resolved.data_parallel_size == 2


def test_extra_segments_become_virtual_stages():
    resolved = resolve(["--hybrid-layer-pattern", PATTERN4, "--pipeline-model-parallel-size", "2"])
    assert resolved.virtual_pipeline_model_parallel_size == 2
    assert resolved.overlap_p2p_comm is True


def test_a_pipe_free_pattern_is_split_by_the_model():
    resolved = resolve(["--hybrid-layer-pattern", "M-M*-M-M*", "--pipeline-model-parallel-size",
                        "4"])
    assert resolved.virtual_pipeline_model_parallel_size is None


def test_segments_must_be_a_multiple_of_pipeline_size():
    found = problems(["--hybrid-layer-pattern", PATTERN4, "--pipeline-model-parallel-size", "8"])
    assert [(p.plugin, p.message) for p in found] == [
        ("experimental", "--hybrid-layer-pattern has 4 pipeline segments, which is not a multiple "
                         "of --pipeline-model-parallel-size 8")]


def test_mtp_depths_set_mtp_num_layers():
    resolved = resolve(["--hybrid-layer-pattern", "MEMEM*EMEMEM*E/*E/*E"])
    assert (resolved.num_layers, resolved.mtp_num_layers) == (14, 2)
    conflicting = resolve(["--hybrid-layer-pattern", "M*/M*", "--mtp-num-layers", "3"])
    assert conflicting.mtp_num_layers == 1
    assert any("--mtp-num-layers 3 disagrees with the 1 MTP depths" in w
               for w in warnings_of(conflicting))
    assert resolve(["--hybrid-layer-pattern", "M*"]).mtp_num_layers is None


def test_malformed_pattern_is_reported_once():
    found = problems(["--hybrid-layer-pattern", "M*Q"])
    assert len(found) == 1 and found[0].plugin == "experimental"
    assert found[0].message.startswith("--hybrid-layer-pattern 'M*Q': the main pattern has unknown "
                                       "layer symbol 'Q'")


# -- deprecated spellings ------------------------------------------------------------------------


def test_hybrid_override_pattern_is_forwarded():
    resolved = resolve(["--hybrid-override-pattern", "M*M*"])
    assert (resolved.hybrid_layer_pattern, resolved.num_layers) == ("M*M*", 4)
    assert resolved.hybrid_override_pattern == "M*M*"
    assert any("--hybrid-override-pattern is deprecated" in w for w in warnings_of(resolved))
    assert messages(["--hybrid-override-pattern", "M*", "--hybrid-layer-pattern", "M*"]) == [
        "--hybrid-override-pattern and --hybrid-layer-pattern cannot both be given"]


def test_legacy_mtp_pattern_is_merged_into_the_unified_pattern():
    resolved = resolve(["--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "MM",
                        "--mtp-num-layers", "2"])
    assert resolved.hybrid_layer_pattern == "M*M*/MM/MM"
    assert resolved.mtp_hybrid_override_pattern is None
    assert (resolved.num_layers, resolved.mtp_num_layers) == (4, 2)
    assert any("--mtp-hybrid-override-pattern is deprecated" in w for w in warnings_of(resolved))


def test_legacy_mtp_pattern_is_kept_without_mtp_layers_or_with_a_unified_pattern():
    kept = resolve(["--hybrid-layer-pattern", "M*M*", "--mtp-hybrid-override-pattern", "MM"])
    assert (kept.hybrid_layer_pattern, kept.mtp_hybrid_override_pattern) == ("M*M*", "MM")
    unified = resolve(["--hybrid-layer-pattern", "M*/M*", "--mtp-hybrid-override-pattern", "MM",
                       "--mtp-num-layers", "1"])
    assert unified.hybrid_layer_pattern == "M*/M*"


# -- the pattern defines the pipeline ------------------------------------------------------------


@pytest.mark.parametrize("flag", [
    ["--num-layers-per-virtual-pipeline-stage", "1"],
    ["--num-virtual-stages-per-pipeline-rank", "2"],
    # a given 0 is still given (Megatron checks `is None`)
    ["--num-virtual-stages-per-pipeline-rank", "0"],
    ["--num-layers-per-virtual-pipeline-stage", "0"],
    ["--pipeline-model-parallel-layout", "Et|tL"],
    ["--account-for-embedding-in-pipeline-split"],
    ["--account-for-loss-in-pipeline-split"],
])
def test_pipeline_flags_contradict_a_pattern(flag):
    found = problems(["--hybrid-layer-pattern", PATTERN4, "--pipeline-model-parallel-size", "4",
                      *flag], env=WORLD4)
    assert (f"{flag[0]} cannot be used with --hybrid-layer-pattern", "experimental") in [
        (p.message, p.plugin) for p in found]


def test_uneven_stages_contradict_only_a_piped_pattern():
    uneven = ["--decoder-first-pipeline-num-layers", "2"]
    found = messages(["--hybrid-layer-pattern", PATTERN4, "--pipeline-model-parallel-size", "4",
                      *uneven], env=WORLD4)
    assert found == ["--decoder-first-pipeline-num-layers cannot be used with a "
                     "--hybrid-layer-pattern that has '|' pipeline segments"]
    assert resolve(["--hybrid-layer-pattern", "M*M*M*", "--pipeline-model-parallel-size", "2",
                    *uneven])


# -- optimizer dtypes, YAML and Triton -----------------------------------------------------------


def test_optimizer_dtypes_become_torch_dtypes():
    resolved = resolve(["--use-precision-aware-optimizer", "--exp-avg-dtype", "fp8",
                        "--main-params-dtype", "fp16", "--exp-avg-sq-dtype", "bf16"])
    assert [encode(resolved[n]) for n in ("main_grads_dtype", "main_params_dtype",
                                          "exp_avg_dtype", "exp_avg_sq_dtype")] == [
        "torch.float32", "torch.float16", "torch.uint8", "torch.bfloat16"]


def test_low_precision_optimizer_state_without_the_optimizer_warns():
    resolved = resolve(["--exp-avg-dtype", "bf16"])
    assert any("--exp-avg-dtype take effect only with --use-precision-aware-optimizer" in w
               for w in warnings_of(resolved))
    assert warnings_of(resolve(["--exp-avg-dtype", "bf16",
                                "--use-precision-aware-optimizer"])) == []


def test_yaml_cfg_is_refused_with_a_way_forward():
    found = problems(["--yaml-cfg", "model.yaml", "--triton-autotune-block-sizes", "BLOCK_M=64"])
    assert [p.message for p in found] == [
        "--yaml-cfg model.yaml is not supported",
        "--triton-autotune-block-sizes cannot be combined with --yaml-cfg"]
    assert "--config FILE" in found[0].hint


def test_triton_block_sizes():
    resolved = resolve(["--triton-autotune-block-sizes", "BLOCK_SIZE=128", "BLOCK_M=64"])
    assert list(resolved.triton_autotune_block_sizes) == [("BLOCK_SIZE", 128), ("BLOCK_M", 64)]
    assert tuple(resolve().triton_autotune_block_sizes) == ()


@pytest.mark.parametrize("text", ["M=64", "BLOCK_M", "BLOCK_M=0", "BLOCK_M=x", "BLOCK-M=4"])
def test_bad_triton_block_sizes(text):
    with pytest.raises(ValueError, match="expected BLOCK_NAME=positive_integer"):
        parse_block_size(text)
    found = problems(["--triton-autotune-block-sizes", text])
    assert found and found[0].flags == ("--triton-autotune-block-sizes",)


def test_spec_takes_any_number_of_words():
    assert resolve(["--spec", "megatron.core.models.hybrid.hybrid_layer_specs",
                    "hybrid_stack_spec"]).spec == ["megatron.core.models.hybrid.hybrid_layer_specs",
                                                   "hybrid_stack_spec"]
    assert resolve(["--spec"]).spec == []
    assert resolve().spec is None


def test_patterns_compare_hash_and_show_by_their_parts():
    pattern = parse_hybrid_pattern("M*M*/M*/M*")
    assert pattern == parse_hybrid_pattern("M*M*/M*/M*") != parse_hybrid_pattern("M*M*/M*")
    assert len({pattern, parse_hybrid_pattern("M*M*/M*/M*")}) == 1
    assert repr(pattern) == "HybridPattern(main='M*M*', mtp='M*', mtp_depths=2)"


def test_an_empty_block_size_list_is_refused_from_a_file_as_from_the_command_line(tmp_path):
    # one conversion, one check: the command line cannot give the flag without a value
    config = tmp_path / "c.yaml"
    for text in ("triton_autotune_block_sizes: []\n", "triton_autotune_block_sizes: ''\n"):
        config.write_text(text)
        with pytest.raises(megaplug.ConfigError) as error:
            megaplug.resolve([*MINIMAL_ARGV, "--config", str(config)], environ={})
        assert "--triton-autotune-block-sizes" in str(error.value)
    with pytest.raises(megaplug.ConfigError, match="expected at least one argument"):
        megaplug.resolve([*MINIMAL_ARGV, "--triton-autotune-block-sizes"], environ={})
