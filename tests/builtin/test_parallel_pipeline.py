"""The parallel plugin's pipeline rules: virtual stages, layouts, uneven and even splits."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppe_support import ENV, messages, problems, resolve, warnings_of  # noqa: E402

from megaplug.builtin.parallel.layout import LayoutError, parse_layout  # noqa: E402

PP4 = ["--pipeline-model-parallel-size", "4"]
WORLD4 = {**ENV, "WORLD_SIZE": "4"}


# -- the layout language -----------------------------------------------------------------------


@pytest.mark.parametrize("text, stages, layers", [
    ("Et*3|(tt|)*6L", 8, 15),
    ("Et*2|(tt|)*5t|tmL", 8, 14),
    ("E|(t|)*3,m|m||L", 8, 3),
    ("Ettt|tttL", 2, 6),
    ("t", 1, 1),
])
def test_layout_stages_and_layers(text, stages, layers):
    layout = parse_layout(text)
    assert (layout.num_stages, layout.count("t")) == (stages, layers)


def test_layout_keeps_empty_stages_and_stage_contents():
    assert parse_layout("E|(t|)*2,m||L").stages == (("E",), ("t",), ("t",), ("m",), (), ("L",))


@pytest.mark.parametrize("text, message", [
    ("E(t", "missing ')'"),
    ("Et)", "unmatched ')'"),
    ("Ex|L", "unexpected 'x'"),
    ("t*|L", "'*' must be followed by a repeat count"),
    ("(t|)*99999999", "expands to more than"),
])
def test_malformed_layouts_are_rejected(text, message):
    with pytest.raises(LayoutError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("*", r"\*")):
        parse_layout(text)


# -- virtual pipeline size -------------------------------------------------------------------------


def test_no_virtual_stages_by_default():
    resolved = resolve(["--num-layers", "8", *PP4], env=WORLD4)
    assert resolved.virtual_pipeline_model_parallel_size is None
    assert (resolved.overlap_p2p_comm, resolved.align_param_gather) == (False, False)
    assert any("non-interleaved pipeline schedule" in w for w in warnings_of(resolved))


def test_no_warning_about_the_schedule_without_pipelining():
    resolved = resolve(["--num-layers", "8"])
    assert resolved.overlap_p2p_comm is False
    assert warnings_of(resolved) == []


def test_layers_per_virtual_stage():
    resolved = resolve(["--num-layers", "12", *PP4, "--num-layers-per-virtual-pipeline-stage",
                        "1"], env=WORLD4)
    assert resolved.virtual_pipeline_model_parallel_size == 3
    assert (resolved.overlap_p2p_comm, resolved.align_param_gather) == (True, True)


def test_layers_per_virtual_stage_counts_embedding_and_loss():
    argv = ["--num-layers", "14", *PP4, "--num-layers-per-virtual-pipeline-stage", "2",
            "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split"]
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size == 2


def test_one_layer_stage_per_rank_is_no_interleaving():
    argv = ["--num-layers", "8", *PP4, "--num-layers-per-virtual-pipeline-stage", "2"]
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size is None


def test_layers_per_stage_must_divide_the_stage():
    found = problems(["--num-layers", "12", *PP4, "--num-layers-per-virtual-pipeline-stage",
                      "2"], env=WORLD4)
    assert [p.message for p in found] == [
        "each of the 4 pipeline stages holds 3 layers, which is not a multiple of "
        "--num-layers-per-virtual-pipeline-stage 2"]
    assert found[0].hint == "use a divisor of 3: 1, 3"


def test_layers_must_split_over_pipeline_with_virtual_stages():
    assert messages(["--num-layers", "13", *PP4, "--num-layers-per-virtual-pipeline-stage", "1"],
                    env=WORLD4) == ["13 layers cannot be split evenly over "
                                    "--pipeline-model-parallel-size 4"]


def test_decoder_layers_are_split_when_num_layers_is_absent():
    argv = ["--decoder-num-layers", "8", *PP4, "--num-layers-per-virtual-pipeline-stage", "1"]
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size == 2


def test_virtual_stages_per_rank():
    argv = ["--num-layers", "12", *PP4, "--num-virtual-stages-per-pipeline-rank", "3"]
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size == 3
    argv[-1] = "1"
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size is None
    # Megatron's validation keeps 0 as the virtual size (only the model build fails): warn
    argv[-1] = "0"
    resolved = resolve(argv, env=WORLD4)
    assert resolved.virtual_pipeline_model_parallel_size == 0
    assert any("--num-virtual-stages-per-pipeline-rank is 0" in w
               for w in warnings_of(resolved))
    argv[-1] = "3"
    assert "interleaved schedule" in " ".join(messages(
        [*argv, "--no-overlap-p2p-communication", "--pipeline-model-parallel-size", "2"],
        env=WORLD4))


def test_uneven_stages_need_virtual_stages_per_rank():
    uneven = ["--decoder-first-pipeline-num-layers", "2", "--decoder-last-pipeline-num-layers", "2"]
    argv = ["--num-layers", "10", *PP4, *uneven]
    found = messages([*argv, "--num-layers-per-virtual-pipeline-stage", "1"], env=WORLD4)
    assert found == ["uneven pipeline stages cannot be combined with "
                     "--num-layers-per-virtual-pipeline-stage"]
    resolved = resolve([*argv, "--num-virtual-stages-per-pipeline-rank", "2"], env=WORLD4)
    assert resolved.virtual_pipeline_model_parallel_size == 2
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size is None


def test_uneven_stage_sizes_below_one_only_warn():
    # Megatron's argument validation accepts them; the model build rejects them later
    resolved = resolve(["--num-layers", "8", *PP4, "--decoder-first-pipeline-num-layers", "0"],
                       env=WORLD4)
    assert resolved.decoder_first_pipeline_num_layers == 0
    assert any("--decoder-first-pipeline-num-layers is 0; a stage needs at least one layer" in w
               for w in warnings_of(resolved))


def test_zero_layers_per_virtual_stage_is_rejected():
    # Megatron divides by it
    assert any("--num-layers-per-virtual-pipeline-stage is 0" in m for m in messages(
        ["--num-layers", "12", *PP4, "--num-layers-per-virtual-pipeline-stage", "0"],
        env=WORLD4))


def test_negative_layers_per_virtual_stage_follow_python_arithmetic():
    # 3 layers per stage: 3 % -3 == 0 passes Megatron's assert (size 3 // -3 == -1), 3 % -2 not
    argv = ["--num-layers", "12", *PP4, "--num-layers-per-virtual-pipeline-stage"]
    assert resolve([*argv, "-3"], env=WORLD4).virtual_pipeline_model_parallel_size == -1
    assert any("not a multiple of --num-layers-per-virtual-pipeline-stage -2" in m
               for m in messages([*argv, "-2"], env=WORLD4))


def test_only_one_way_to_ask_for_virtual_stages():
    found = problems(["--num-layers", "12", *PP4, "--num-layers-per-virtual-pipeline-stage", "1",
                      "--num-virtual-stages-per-pipeline-rank", "3"], env=WORLD4)
    assert [p.message for p in found] == [
        "only one way to set virtual pipeline stages may be used, got "
        "--num-layers-per-virtual-pipeline-stage 1, --num-virtual-stages-per-pipeline-rank 3"]


def test_layout_sets_the_virtual_stages():
    argv = ["--num-layers", "15", "--pipeline-model-parallel-size", "2",
            "--pipeline-model-parallel-layout", "Et*3|(tt|)*6L"]
    resolved = resolve(argv)
    assert resolved.virtual_pipeline_model_parallel_size == 4
    assert warnings_of(resolved) == []


def test_layout_with_one_stage_per_rank_is_no_interleaving():
    argv = ["--num-layers", "6", "--pipeline-model-parallel-size", "2",
            "--pipeline-model-parallel-layout", "Ettt|tttL"]
    assert resolve(argv).virtual_pipeline_model_parallel_size is None


def test_layout_stages_must_be_a_multiple_of_pipeline_size():
    found = problems(["--num-layers", "6", *PP4, "--pipeline-model-parallel-layout",
                      "Ett|tt|ttL"], env=WORLD4)
    assert [p.message for p in found] == [
        "--pipeline-model-parallel-layout describes 3 stages, which is not a multiple of "
        "--pipeline-model-parallel-size 4"]


def test_malformed_layout_is_a_problem():
    found = messages(["--num-layers", "2", "--pipeline-model-parallel-layout", "Et(|tL"])
    assert found == ["--pipeline-model-parallel-layout is malformed: missing ')' at position 6 "
                     "in 'Et(|tL'"]


def test_layout_with_another_layer_count_warns():
    resolved = resolve(["--num-layers", "8", "--pipeline-model-parallel-size", "2",
                        "--pipeline-model-parallel-layout", "Ettt|tttL"])
    assert any("places 6 decoder layers ('t') but --num-layers is 8" in w
               for w in warnings_of(resolved))


def test_layout_skips_the_even_split_rule():
    argv = ["--num-layers", "14", *PP4, "--pipeline-model-parallel-layout", "Et*2|(tt|)*5t|tmL"]
    assert resolve(argv, env=WORLD4).virtual_pipeline_model_parallel_size == 2


# -- even split without virtual stages ------------------------------------------------------


def test_layers_must_split_evenly_over_pipeline_stages():
    found = problems(["--num-layers", "13", *PP4], env=WORLD4)
    assert [p.message for p in found] == [
        "13 layers cannot be split evenly over --pipeline-model-parallel-size 4"]
    assert "--decoder-first-pipeline-num-layers" in found[0].hint


def test_even_split_counts_embedding_and_loss():
    argv = ["--num-layers", "14", *PP4, "--account-for-embedding-in-pipeline-split",
            "--account-for-loss-in-pipeline-split"]
    assert resolve(argv, env=WORLD4)
    assert messages(argv[:-1], env=WORLD4) == [
        "15 layers (counting the embedding) cannot be split evenly over "
        "--pipeline-model-parallel-size 4"]


def test_uneven_first_and_last_stages_lift_the_even_split_rule():
    assert resolve(["--num-layers", "13", *PP4, "--decoder-first-pipeline-num-layers", "4"],
                   env=WORLD4)


# -- interleaved schedule ------------------------------------------------------------------------


def test_interleaving_needs_pipeline_parallelism():
    found = messages(["--num-layers", "8", "--num-virtual-stages-per-pipeline-rank", "2"])
    assert found == ["virtual pipeline stages (interleaved schedule) need "
                     "--pipeline-model-parallel-size greater than 1, got 1"]


def test_interleaving_without_p2p_overlap_needs_three_stages():
    argv = ["--num-layers", "8", "--num-virtual-stages-per-pipeline-rank", "2",
            "--no-overlap-p2p-communication"]
    found = messages([*argv, "--pipeline-model-parallel-size", "2"])
    assert found == ["the interleaved schedule without p2p overlap (--no-overlap-p2p-communication)"
                     " needs --pipeline-model-parallel-size greater than 2, got 2"]
    assert resolve([*argv, *PP4], env=WORLD4).overlap_p2p_comm is False


def test_layouts_compare_hash_and_show_by_their_stages():
    layout = parse_layout("E|t|tL")
    assert layout == parse_layout("E,|t|tL") != parse_layout("E|tt|L")
    assert len({layout, parse_layout("E|t|tL")}) == 1
    assert repr(layout) == "PipelineLayout(stages=(('E',), ('t',), ('t', 'L')))"
