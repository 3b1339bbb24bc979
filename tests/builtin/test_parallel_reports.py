"""What each parallel-size and pipeline rule reports, whole: the message, every flag it
names and the hint (or the warning and its flags); and for each derivation, the value, why
and from what.

Through ``megaplug.resolve`` with every installed plugin. A problem is found by the flags it
names, not by the plugin or module that holds the rule.
"""

from __future__ import annotations

from typing import Optional

import pytest

import megaplug
from megaplug.testing import resolve

SIZES = ("--tensor-model-parallel-size", "--pipeline-model-parallel-size",
         "--context-parallel-size")
VIRTUAL = ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank",
           "--pipeline-model-parallel-layout")
SPLIT = ("--num-layers", "--pipeline-model-parallel-size",
         "--account-for-embedding-in-pipeline-split", "--account-for-loss-in-pipeline-split")
# two micro-batches a step on two ranks: the interleaved schedule needs PP of them
PP2 = ("--pipeline-model-parallel-size", "2", "--global-batch-size", "2")
NOT_INTERLEAVED = ("turning off p2p communication overlap and aligned parameter all-gather: the "
                   "non-interleaved pipeline schedule supports neither",
                   ("--no-overlap-p2p-communication", "--no-align-param-gather"))


def outcome(*argv: str, **environ: str) -> tuple[Optional[megaplug.Resolved], list]:
    try:
        return resolve(*argv, environ=environ), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


def reported(found: list, *flags: str) -> list[tuple]:
    """(message, flags, hint) of each problem naming all of ``flags``."""
    return [(p.message, tuple(p.flags), p.hint) for p in found if set(flags) <= set(p.flags)]


def warned(resolved: megaplug.Resolved, *flags: str) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings if set(flags) <= set(w.flags)]


@pytest.mark.parametrize("argv, world, expected", [
    (("--tensor-model-parallel-size", "2"), "3",
     ("world size 3 is not divisible by the model-parallel size 2 (TP 2 x PP 1 x CP 1)",
      ("WORLD_SIZE", *SIZES),
      "launch a multiple of 2 processes, or choose sizes whose product divides 3: 1 or 3")),
    (("--tensor-model-parallel-size", "4"), "6",
     ("world size 6 is not divisible by the model-parallel size 4 (TP 4 x PP 1 x CP 1)",
      ("WORLD_SIZE", *SIZES),
      "launch a multiple of 4 processes, or choose sizes whose product divides 6: 1, 2, 3 or 6")),
    (("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
      "--context-parallel-size", "2"), "12",
     ("world size 12 is not divisible by the model-parallel size 8 (TP 2 x PP 2 x CP 2)",
      ("WORLD_SIZE", *SIZES),
      "launch a multiple of 8 processes, or choose sizes whose product divides 12: 1, 2, 3, 4, "
      "6 or 12")),
    (("--tensor-model-parallel-size", "2"), "1",
     ("world size 1 is not divisible by the model-parallel size 2 (TP 2 x PP 1 x CP 1)",
      ("WORLD_SIZE", *SIZES),
      "launch a multiple of 2 processes, or choose sizes whose product divides 1: 1")),
    ((), "0",
     ("WORLD_SIZE is 0; a job needs at least one process", ("WORLD_SIZE",),
      "set WORLD_SIZE to the number of processes")),
    (("--tensor-model-parallel-size", "0"), "1",
     ("--tensor-model-parallel-size is 0; it must be at least 1",
      ("--tensor-model-parallel-size",), "use 1 to turn this kind of parallelism off")),
    (("--context-parallel-size", "4", "--hierarchical-context-parallel-sizes", "2", "3"), "4",
     ("--hierarchical-context-parallel-sizes 2 3 multiply to 6, not to the context-parallel "
      "size 4", ("--hierarchical-context-parallel-sizes", "--context-parallel-size"),
      "give sizes whose product is 4")),
    (("--context-parallel-size", "2", "--cp-comm-type", "a2a+p2p"), "2",
     ("--cp-comm-type a2a+p2p needs --hierarchical-context-parallel-sizes",
      ("--cp-comm-type", "--hierarchical-context-parallel-sizes"),
      "set the a2a and p2p group sizes, e.g. --hierarchical-context-parallel-sizes 2 4 for a "
      "context-parallel size of 8")),
    (("--model-parallel-size", "2"), "1",
     ("--model-parallel-size 2 is no longer supported", ("--model-parallel-size",),
      "use --tensor-model-parallel-size instead")),
    (PP2 + ("--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "1",
            "--num-virtual-stages-per-pipeline-rank", "2"), "2",
     ("only one way to set virtual pipeline stages may be used, got "
      "--num-layers-per-virtual-pipeline-stage 1, --num-virtual-stages-per-pipeline-rank 2",
      ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"),
      "keep one of these flags and drop the others")),
    (PP2 + ("--pipeline-model-parallel-layout", "Et|tt|t"), "2",
     ("--pipeline-model-parallel-layout describes 3 stages, which is not a multiple of "
      "--pipeline-model-parallel-size 2",
      ("--pipeline-model-parallel-layout", "--pipeline-model-parallel-size"),
      "describe a multiple of 2 stages ('|' ends a stage)")),
    (PP2 + ("--pipeline-model-parallel-layout", "Et|X"), "2",
     ("--pipeline-model-parallel-layout is malformed: unexpected 'X' (layer symbols are E, t, m, "
      "L, '|' ends a stage) at position 3 in 'Et|X'", ("--pipeline-model-parallel-layout",),
      "describe stages with E, t, m, L separated by '|', e.g. 'Et|(tt|)*3L'")),
    (PP2 + ("--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "1",
            "--decoder-first-pipeline-num-layers", "1"), "2",
     ("uneven pipeline stages cannot be combined with --num-layers-per-virtual-pipeline-stage",
      ("--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers",
       "--decoder-last-pipeline-num-layers"),
      "give the virtual pipeline degree with --num-virtual-stages-per-pipeline-rank")),
    (PP2 + ("--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "3"), "2",
     ("each of the 2 pipeline stages holds 2 layers, which is not a multiple of "
      "--num-layers-per-virtual-pipeline-stage 3",
      ("--num-layers-per-virtual-pipeline-stage", "--num-layers",
       "--pipeline-model-parallel-size"), "use a divisor of 2: 1, 2")),
    (PP2 + ("--num-layers", "4", "--num-layers-per-virtual-pipeline-stage", "0"), "2",
     ("--num-layers-per-virtual-pipeline-stage is 0; a virtual stage needs at least one layer",
      ("--num-layers-per-virtual-pipeline-stage",), "use a divisor of 2")),
    (PP2 + ("--num-layers", "3", "--num-layers-per-virtual-pipeline-stage", "1"), "2",
     ("3 layers cannot be split evenly over --pipeline-model-parallel-size 2", SPLIT,
      "use a layer count that is a multiple of 2")),
    (PP2 + ("--num-layers", "3"), "2",
     ("3 layers cannot be split evenly over --pipeline-model-parallel-size 2", SPLIT,
      "use a multiple of 2 layers, or place layers unevenly with "
      "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers or "
      "--pipeline-model-parallel-layout")),
    (PP2 + ("--num-layers", "2", "--account-for-loss-in-pipeline-split"), "2",
     ("3 layers (counting the loss) cannot be split evenly over --pipeline-model-parallel-size 2",
      SPLIT, "use a multiple of 2 layers, or place layers unevenly with "
      "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers or "
      "--pipeline-model-parallel-layout")),
    (PP2 + ("--num-layers", "3", "--account-for-loss-in-pipeline-split",
            "--account-for-embedding-in-pipeline-split"), "2",
     ("5 layers (counting the embedding and loss) cannot be split evenly over "
      "--pipeline-model-parallel-size 2", SPLIT,
      "use a multiple of 2 layers, or place layers unevenly with "
      "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers or "
      "--pipeline-model-parallel-layout")),
    (("--num-layers", "4", "--num-virtual-stages-per-pipeline-rank", "2"), "1",
     ("virtual pipeline stages (interleaved schedule) need --pipeline-model-parallel-size greater "
      "than 1, got 1", ("--pipeline-model-parallel-size", *VIRTUAL),
      "raise the pipeline-parallel size or drop the virtual-stage flags")),
    (PP2 + ("--num-layers", "4", "--num-virtual-stages-per-pipeline-rank", "2",
            "--no-overlap-p2p-communication"), "2",
     ("the interleaved schedule without p2p overlap (--no-overlap-p2p-communication) needs "
      "--pipeline-model-parallel-size greater than 2, got 2",
      ("--pipeline-model-parallel-size", "--no-overlap-p2p-communication"),
      "keep p2p overlap on, or use at least 3 pipeline stages, so two ranks never exchange "
      "several sends and receives in one batch")),
])
def test_each_rule_reports_its_message_flags_and_hint(argv, world, expected):
    _, found = outcome(*argv, WORLD_SIZE=world)
    assert reported(found, *expected[1]) == [expected]


@pytest.mark.parametrize("argv, environ, expected", [
    (("--global-batch-size", "2"), {"WORLD_SIZE": "-2"},
     ("WORLD_SIZE is -2; a job has at least one process (resolved with Megatron's arithmetic)",
      ("WORLD_SIZE",))),
    ((), {"WORLD_SIZE": "2", "RANK": "-1"}, ("RANK is -1; ranks start at 0", ("RANK",))),
    ((), {"WORLD_SIZE": "2", "RANK": "2"},
     ("RANK 2 is not below WORLD_SIZE 2; check the launcher's environment",
      ("RANK", "WORLD_SIZE"))),
    # the pre-flight plugin refuses these at model-build time; Megatron's validate_args warns
    (("-p", "no:preflight", "--pipeline-model-parallel-size", "-1", "--global-batch-size", "1"),
     {},
     ("--pipeline-model-parallel-size is -1; parallel sizes are normally at least 1",
      ("--pipeline-model-parallel-size",))),
    (PP2 + ("--num-layers", "4", "--num-virtual-stages-per-pipeline-rank", "0"),
     {"WORLD_SIZE": "2"},
     ("--num-virtual-stages-per-pipeline-rank is 0; building the model will fail (use 2 or more "
      "for the interleaved schedule)", ("--num-virtual-stages-per-pipeline-rank",))),
    (("-p", "no:preflight", *PP2, "--num-layers", "4", "--decoder-first-pipeline-num-layers",
      "0"), {"WORLD_SIZE": "2"},
     ("--decoder-first-pipeline-num-layers is 0; a stage needs at least one layer, so building "
      "the model will fail", ("--decoder-first-pipeline-num-layers",))),
    (PP2 + ("--num-layers", "4"), {"WORLD_SIZE": "2"}, NOT_INTERLEAVED),
    (("-p", "no:preflight", *PP2, "--num-layers", "4", "--pipeline-model-parallel-layout",
      "Et|tt|tt|L"), {"WORLD_SIZE": "2"},
     ("--pipeline-model-parallel-layout places 5 decoder layers ('t') but --num-layers is 4; "
      "building the model will fail", ("--pipeline-model-parallel-layout", "--num-layers"))),
])
def test_each_suspicious_value_is_a_warning_with_its_flags(argv, environ, expected):
    resolved, found = outcome(*argv, **environ)
    assert found == [], [str(p) for p in found]
    assert expected in warned(resolved, *expected[1])


@pytest.mark.parametrize("rank, world, suspicious", [("0", "1", False), ("1", "2", False),
                                                     ("2", "2", True), ("-1", "1", True)])
def test_rank_lies_in_the_world(rank, world, suspicious):
    resolved, found = outcome(WORLD_SIZE=world, RANK=rank)
    assert found == []
    assert bool(warned(resolved, "RANK")) is suspicious


@pytest.mark.parametrize("world, suspicious", [("1", False), ("-1", True)])
def test_a_negative_world_is_suspicious(world, suspicious):
    resolved, found = outcome("--global-batch-size", "1", WORLD_SIZE=world)
    assert found == []
    assert bool([w for w in warned(resolved, "WORLD_SIZE") if "RANK" not in w[1]]) is suspicious


def test_the_data_parallel_size_says_how_it_was_computed():
    resolved, _ = outcome("--tensor-model-parallel-size", "2", WORLD_SIZE="4")
    record = resolved.source("data_parallel_size")
    assert (resolved.data_parallel_size, record.source, record.reason, record.inputs) == (
        2, "derived", "world size divided by the ranks of one model-parallel group",
        ("world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
         "context_parallel_size"))
    pipeline = resolved.source("transformer_pipeline_model_parallel_size")
    assert (resolved.transformer_pipeline_model_parallel_size, pipeline.inputs) == (
        1, ("pipeline_model_parallel_size",))


@pytest.mark.parametrize("argv, world, virtual, inputs", [
    (PP2 + ("--num-layers", "4", "--num-virtual-stages-per-pipeline-rank", "2"), "2", 2,
     ("num_virtual_stages_per_pipeline_rank",)),
    (PP2 + ("--num-layers", "8", "--num-layers-per-virtual-pipeline-stage", "2"), "2", 2,
     ("num_layers_per_virtual_pipeline_stage",)),
    (PP2 + ("--num-layers", "4", "--pipeline-model-parallel-layout", "Et|t|t|tL"), "2", 2,
     ("pipeline_model_parallel_layout",)),
    (PP2 + ("--pipeline-model-parallel-layout", "Et|tL"), "2", None,
     ("pipeline_model_parallel_layout",)),
    (PP2 + ("--num-layers", "4"), "2", None, ("pipeline_model_parallel_size",)),
])
def test_the_virtual_pipeline_size_comes_from_one_flag(argv, world, virtual, inputs):
    resolved, found = outcome(*argv, WORLD_SIZE=world)
    assert found == [], [str(p) for p in found]
    assert resolved.virtual_pipeline_model_parallel_size == virtual
    assert resolved.source("virtual_pipeline_model_parallel_size").inputs == inputs


@pytest.mark.parametrize("pp, warning", [("1", False), ("2", True)])
def test_the_non_interleaved_schedule_turns_off_p2p_overlap(pp, warning):
    resolved, found = outcome("--pipeline-model-parallel-size", pp, "--num-layers", "4",
                              WORLD_SIZE=pp)
    assert found == []
    assert (resolved.overlap_p2p_comm, resolved.align_param_gather) == (False, False)
    record = resolved.source("overlap_p2p_comm")
    assert (record.reason, record.inputs) == (
        "the non-interleaved schedule does not support it",
        ("virtual_pipeline_model_parallel_size",))
    assert (NOT_INTERLEAVED in warned(resolved, "--no-overlap-p2p-communication")) is warning


def test_the_interleaved_schedule_keeps_p2p_overlap():
    resolved, found = outcome(*PP2, "--num-layers", "4", "--num-virtual-stages-per-pipeline-rank",
                              "2", WORLD_SIZE="2")
    assert found == []
    assert (resolved.overlap_p2p_comm, resolved.align_param_gather) == (True, True)


# -- values that are integers, and edges the cases above do not reach ------------------


@pytest.mark.parametrize("argv", [
    PP2 + ("--num-layers", "8", "--num-layers-per-virtual-pipeline-stage", "2"),
    PP2 + ("--num-layers", "4", "--pipeline-model-parallel-layout", "Et|t|t|tL"),
])
def test_the_virtual_pipeline_size_is_an_integer(argv):
    resolved, found = outcome(*argv, WORLD_SIZE="2")
    assert found == []
    assert type(resolved.virtual_pipeline_model_parallel_size) is int


def test_one_virtual_stage_per_rank_is_no_interleaving_and_no_warning():
    resolved, found = outcome(*PP2, "--num-layers", "4", "--num-virtual-stages-per-pipeline-rank",
                              "1", WORLD_SIZE="2")
    assert found == []
    assert resolved.virtual_pipeline_model_parallel_size is None
    assert warned(resolved, "--num-virtual-stages-per-pipeline-rank") == []


def test_layers_per_virtual_stage_need_a_layer_count():
    with pytest.raises(megaplug.ConfigError) as info:
        megaplug.resolve(["--hidden-size", "64", "--num-attention-heads", "4", "--seq-length",
                          "128", "--max-position-embeddings", "128", "--micro-batch-size", "1",
                          *PP2, "--num-layers-per-virtual-pipeline-stage", "1"],
                         environ={"WORLD_SIZE": "2"})
    assert reported(list(info.value.problems), "--num-layers-per-virtual-pipeline-stage") == [
        ("--num-layers-per-virtual-pipeline-stage needs the number of layers",
         ("--num-layers-per-virtual-pipeline-stage", "--num-layers"), "set --num-layers")]


def test_encoder_layers_are_not_split_over_the_decoder_pipeline():
    """num_layers defaulted from --encoder-num-layers (T5) is not the user's: Megatron
    copies it only after the pipeline split, so 3 layers over 2 stages is not refused."""
    resolved = megaplug.resolve(["--encoder-num-layers", "3", "--hidden-size", "64",
                                 "--num-attention-heads", "4", "--seq-length", "128",
                                 "--max-position-embeddings", "128", "--micro-batch-size", "1",
                                 *PP2], environ={"WORLD_SIZE": "2"})
    assert resolved.num_layers == 3


def test_a_hybrid_pattern_in_one_segment_is_not_split_evenly_here():
    resolved, found = outcome("--hybrid-layer-pattern", "M-M", *PP2, WORLD_SIZE="2")
    assert found == []
    assert resolved.virtual_pipeline_model_parallel_size is None


def test_a_zero_world_is_one_problem():
    _, found = outcome(WORLD_SIZE="0")
    assert [p.message for p in found] == ["WORLD_SIZE is 0; a job needs at least one process"]


def test_rank_one_of_a_world_of_one_is_suspicious():
    resolved, found = outcome(WORLD_SIZE="1", RANK="1")
    assert found == []
    assert warned(resolved, "RANK") == [
        ("RANK 1 is not below WORLD_SIZE 1; check the launcher's environment",
         ("RANK", "WORLD_SIZE"))]


@pytest.mark.parametrize("argv, world, rejected", [
    (("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards", "4"), "4",
     False),
    (("-p", "no:gtp", "--tensor-model-parallel-size", "2"), "2", False),  # no GTP: factor 1
])
def test_gtp_weight_shards_count_in_the_replica_only_with_gtp(argv, world, rejected):
    _, found = outcome(*argv, WORLD_SIZE=world)
    assert bool(reported(found, "WORLD_SIZE")) is rejected


def test_the_world_size_message_names_the_gtp_factor():
    _, found = outcome("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards",
                       "4", WORLD_SIZE="2")
    assert reported(found, "WORLD_SIZE") == [
        ("world size 2 is not divisible by the model-parallel size 4 (TP 2 x PP 1 x CP 1 x GTP "
         "weight shards 2)", ("WORLD_SIZE", *SIZES, "--tensor-parallel-num-weight-shards"),
         "launch a multiple of 4 processes, or use a remat size that divides the 1 data-parallel "
         "ranks")]
