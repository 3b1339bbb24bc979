"""Pipeline-stage rules whole (message, flags, hint), each at the boundary it draws and
with the near miss that must pass: uneven first/last stages, embedding and loss
accounting, explicit layouts, p2p overlap and deferred embedding gradients.

Megatron's checks are TransformerConfig.__post_init__ (uneven stages, accounting, layout
via PipelineParallelLayerLayout.validate_layer_layout) and ModelParallelConfig.__post_init__
(p2p overlap, deferred embedding gradients)."""

from __future__ import annotations

import pytest
from preflight_launches import problems

AT_MODEL_BUILD = "; Megatron would raise this when building the model"
PP = "--pipeline-model-parallel-size"
VPP = "--num-virtual-stages-per-pipeline-rank"
FIRST = "--decoder-first-pipeline-num-layers"
LAST = "--decoder-last-pipeline-num-layers"
EMBEDDING = "--account-for-embedding-in-pipeline-split"
LOSS = "--account-for-loss-in-pipeline-split"
LAYOUT = "--pipeline-model-parallel-layout"
MTP = ["--position-embedding-type", "rope", "--mtp-num-layers"]


def whole(argv: list[str], *, others: bool = False) -> list[tuple[str, tuple[str, ...], str]]:
    """Pre-flight's problems as (message without the common ending, flags, hint); unless
    ``others``, no other plugin may object (the launch passes validate_args)."""
    # enough micro-batches per step for an interleaved schedule (first_step.py refuses fewer)
    found = problems([*argv, "--global-batch-size", "64"])
    if not others:
        assert not [str(p) for p in found if p.plugin != "preflight"]
    mine = [p for p in found if p.plugin == "preflight"]
    assert all(p.message.endswith(AT_MODEL_BUILD) for p in mine)
    return [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint) for p in mine]


def test_a_pipeline_size_below_one_is_rejected_by_pre_flight_too():
    # validate_args' own check (the parallel plugin) also fires; pre-flight still reports
    assert whole([PP, "0"], others=True) == [
        (f"{PP} 0 must be at least 1", (PP,), "use 1 for no pipeline parallelism")]
    assert whole([PP, "1"]) == []


UNEVEN_WITH_ACCOUNTING_HINT = ("size the first/last stages yourself, or let the embedding and "
                               "loss count as layers; not both")


@pytest.mark.parametrize("argv, uneven, accounting", [
    ([FIRST, "4", LOSS, EMBEDDING], [FIRST], [EMBEDDING, LOSS]),
    ([LAST, "4", FIRST, "4", EMBEDDING], [FIRST, LAST], [EMBEDDING]),
    ([LAST, "4", LOSS], [LAST], [LOSS]),
])
def test_uneven_stages_cannot_be_combined_with_accounting(argv, uneven, accounting):
    assert whole([PP, "2", *argv]) == [
        (f"{' / '.join(uneven)} cannot be combined with {' / '.join(accounting)}",
         (*uneven, *accounting), UNEVEN_WITH_ACCOUNTING_HINT)]


def test_an_empty_first_stage_still_counts_as_given_against_accounting():
    # a stage size of 0 is set (Megatron tests `is not None`), and is also too small
    assert whole([PP, "2", FIRST, "0", LOSS]) == [
        (f"{FIRST} cannot be combined with {LOSS}", (FIRST, LOSS), UNEVEN_WITH_ACCOUNTING_HINT),
        (f"{FIRST} 0 must be at least 1", (FIRST,), "give the stage at least one layer")]


@pytest.mark.parametrize("extra, others", [
    ([FIRST, "4"], [FIRST]),
    ([LAST, "0"], [LAST]),
    ([LOSS], [LOSS]),
    ([EMBEDDING, LAST, "4"], [LAST, EMBEDDING]),
])
def test_a_layout_excludes_the_other_split_flags(extra, others):
    found = whole([PP, "2", LAYOUT, "Etttt|ttttL", *extra])
    assert found[-1] == (f"{LAYOUT} cannot be combined with {', '.join(others)}",
                         (LAYOUT, *others), "describe the split in the layout alone")


@pytest.mark.parametrize("layout", ["Etttt|ttttL", "Et*4|t*4L", "Ett,tt|tt,ttL",
                                    "(Etttt|)*1ttttL"])
def test_a_layout_that_places_the_model_passes(layout):
    assert whole([PP, "2", LAYOUT, layout]) == []


LAYOUT_HINT = ("write the layout as E, then the stages' 't' (and 'm') layers separated by '|', "
               "then L, e.g. 'Et|(tt|)*3tL'")
LAYOUT_FLAGS = (LAYOUT, "--num-layers", "--mtp-num-layers")
NO_EMBEDDING = "must start with the embedding 'E' and hold it once"
NO_LOSS = "must end with the loss 'L' and hold it once"
MTP_AFTER_DECODER = "places a decoder layer after an MTP layer"
MTP_NOT_LAST = "puts MTP layers in a stage other than a rank's last virtual stage"
MTP_SPLIT = "splits the MTP layers over several stages"


@pytest.mark.parametrize("argv, layout, found", [
    ([], "tttt|ttttEL", [NO_EMBEDDING]),
    ([], "EEtttt|ttttL", [NO_EMBEDDING]),
    ([], "Etttt|ttttLL", [NO_LOSS]),
    ([], "Etttt|tLttt", [NO_LOSS]),
    ([], "ELtttt|ttttL", [NO_LOSS]),
    # commas only group layers for reading; (...)*n and x*n repeat them
    ([], "tt,tt|tt,ttEL", [NO_EMBEDDING]),
    ([], "(tttt|)*1t*4EL", [NO_EMBEDDING]),
    ([], "Ettt|ttttL", ["places 7 decoder layers ('t'), but --num-layers 8"]),
    ([], "Etttt|tttttL", ["places 9 decoder layers ('t'), but --num-layers 8"]),
    ([], "Etttt|ttttmL", ["places 1 MTP layers ('m'), but --mtp-num-layers is None"]),
    ([*MTP, "0"], "Etttt|ttttmL", ["places 1 MTP layers ('m'), but --mtp-num-layers is 0"]),
    ([*MTP, "1"], "Etttt|ttttL", ["places 0 MTP layers ('m'), but --mtp-num-layers is 1"]),
    ([*MTP, "1"], "Etttt|tttmtL", [MTP_AFTER_DECODER]),
    ([*MTP, "1"], "Ettttm|ttttL", [MTP_AFTER_DECODER]),
    ([*MTP, "2"], "Etttt|ttttmL",
     ["places 1 MTP layers ('m'), but --mtp-num-layers is 2", MTP_SPLIT]),
    ([*MTP, "2"], "Ett|tt|ttm|ttmL", [MTP_AFTER_DECODER, MTP_SPLIT]),
    ([*MTP, "2"], "Ett|ttmm|tt|ttL", [MTP_AFTER_DECODER, MTP_NOT_LAST]),
    ([*MTP, "2"], "Ettmm|tt|tt|ttL", [MTP_AFTER_DECODER, MTP_NOT_LAST]),
])
def test_a_layout_that_misplaces_the_model_is_rejected(argv, layout, found):
    assert whole([PP, "2", LAYOUT, layout, *argv]) == [
        (f"{LAYOUT} {layout} {problem}", LAYOUT_FLAGS, LAYOUT_HINT) for problem in found]


@pytest.mark.parametrize("argv, layout", [
    ([*MTP, "0"], "Etttt|ttttL"),
    ([*MTP, "1"], "Etttt|ttttmL"),
    ([*MTP, "2"], "Etttt|ttttmmL"),
    ([*MTP, "2"], "Ett|tt|tt|ttmmL"),
    # the last virtual stage of the first rank: stage 2 of 4 over two ranks
    ([*MTP, "2"], "Ett|tt|ttttmm|L"),
])
def test_mtp_layers_placed_last_and_together_pass(argv, layout):
    assert whole([PP, "2", LAYOUT, layout, *argv]) == []


def test_a_layout_with_one_stage_per_rank_is_judged_at_pipeline_size_one():
    assert whole([LAYOUT, "EttttttttL"]) == []
    assert whole([LAYOUT, "ttttttttEL"]) == [
        (f"{LAYOUT} ttttttttEL {NO_EMBEDDING}", LAYOUT_FLAGS, LAYOUT_HINT)]


MIDDLE_FLAGS = ("--num-layers", PP)


@pytest.mark.parametrize("pp, argv", [
    ("4", [FIRST, "2", LAST, "2"]),
    ("2", [FIRST, "3", LAST, "5"]),
    ("2", [FIRST, "1"]),
    ("2", [LAST, "7"]),
    ("4", [VPP, "2", FIRST, "2", LAST, "2"]),
    ("4", [VPP, "2", FIRST, "2"]),
    ("8", [FIRST, "1", LAST, "1"]),
])
def test_an_uneven_split_that_adds_up_passes(pp, argv):
    assert whole([PP, pp, *argv]) == []


@pytest.mark.parametrize("pp, argv, found", [
    ("2", [LAST, "0"],
     [(f"{LAST} 0 must be at least 1", (LAST,), "give the stage at least one layer")]),
    ("2", [FIRST, "-1", LAST, "9"],
     [(f"{FIRST} -1 must be at least 1", (FIRST,), "give the stage at least one layer")]),
    ("2", [FIRST, "3", LAST, "4"],
     [("the uneven split leaves 1 layers for 0 middle stages", (FIRST, LAST, *MIDDLE_FLAGS),
       "make the first and last stage sizes add up with the middle stages' share of "
       "--num-layers")]),
    ("2", [LAST, "8"],
     [("the uneven split leaves 0 layers for 1 middle stages", (LAST, *MIDDLE_FLAGS),
       "make the first and last stage sizes add up with the middle stages' share of "
       "--num-layers")]),
    ("4", [FIRST, "2", LAST, "1"],
     [("the 5 layers between the first and last stage cannot be split evenly over 2 middle "
       "stages", (FIRST, LAST, *MIDDLE_FLAGS), "leave a multiple of 2 layers for the middle "
                                               "stages")]),
    ("4", [FIRST, "3"],
     [("the 5 layers between the first and last stage cannot be split evenly over 3 middle "
       "stages", (FIRST, *MIDDLE_FLAGS), "leave a multiple of 3 layers for the middle stages")]),
    ("4", [VPP, "2", FIRST, "1", LAST, "3"],
     [(f"{FIRST} 1 is not a multiple of the 2 virtual pipeline stages per rank", (FIRST, VPP),
       "use a multiple of 2"),
      (f"{LAST} 3 is not a multiple of the 2 virtual pipeline stages per rank", (LAST, VPP),
       "use a multiple of 2")]),
    ("4", [VPP, "2", FIRST, "2", LAST, "4"],
     [("each middle stage holds 1 layers, not a multiple of the 2 virtual pipeline stages per "
       "rank", (FIRST, LAST, *MIDDLE_FLAGS), "give each middle stage a multiple of 2 layers")]),
])
def test_an_uneven_split_that_does_not_add_up_is_rejected(pp, argv, found):
    assert whole([PP, pp, *argv]) == found


def test_the_uneven_split_is_judged_once_a_layout_is_absent():
    # with a layout, the uneven sizes are reported as a conflict only, not as a bad split
    assert whole([PP, "2", LAYOUT, "Etttt|ttttL", FIRST, "3", LAST, "4"]) == [
        (f"{LAYOUT} cannot be combined with {FIRST}, {LAST}", (LAYOUT, FIRST, LAST),
         "describe the split in the layout alone")]


@pytest.mark.parametrize("argv", [
    [PP, "2", EMBEDDING, LOSS],
    [PP, "2", EMBEDDING, LOSS, VPP, "5"],
    [PP, "2", EMBEDDING, LOSS, VPP, "1"],
    [PP, "1", LOSS, "--num-layers", "7"],
    [PP, "1", LOSS],
    [PP, "2", LOSS, "--num-layers", "7", VPP, "2"],
])
def test_accounted_layers_that_divide_pass(argv):
    assert whole(argv) == []


@pytest.mark.parametrize("argv, found", [
    ([PP, "2", EMBEDDING, LOSS, VPP, "2"],
     [("each pipeline rank holds 5 layers (counting the embedding / loss), not a multiple of "
       "its 2 virtual stages", (EMBEDDING, LOSS, "--num-layers", PP, VPP),
       "give each rank a multiple of 2 layers")]),
    ([PP, "2", LOSS, "--num-layers", "9", VPP, "2"],
     [("each pipeline rank holds 5 layers (counting the embedding / loss), not a multiple of "
       "its 2 virtual stages", (LOSS, "--num-layers", PP, VPP),
       "give each rank a multiple of 2 layers")]),
    ([PP, "4", EMBEDDING, "--num-layers", "11", VPP, "2"],
     [("each pipeline rank holds 3 layers (counting the embedding / loss), not a multiple of "
       "its 2 virtual stages", (EMBEDDING, "--num-layers", PP, VPP),
       "give each rank a multiple of 2 layers")]),
])
def test_accounted_layers_per_rank_must_fill_the_virtual_stages(argv, found):
    assert whole(argv) == found


P2P_WARMUP = "--overlap-p2p-communication-warmup-flush"


def test_p2p_overlap_in_warm_up_needs_p2p_overlap():
    # validate_args turns p2p overlap off without an interleaved schedule
    found = [(f"{P2P_WARMUP} needs p2p overlap, which is on only with an interleaved pipeline "
              "schedule and without --no-overlap-p2p-communication",
              (P2P_WARMUP, "--no-overlap-p2p-communication"),
              f"use {VPP} without --no-overlap-p2p-communication, or drop {P2P_WARMUP}")]
    assert whole([P2P_WARMUP]) == found
    assert whole([PP, "4", VPP, "2", P2P_WARMUP, "--no-overlap-p2p-communication"]) == found
    assert whole([PP, "4", VPP, "2", P2P_WARMUP]) == []
    assert whole([PP, "4", VPP, "2", "--no-overlap-p2p-communication"]) == []


DEFER = "--defer-embedding-wgrad-compute"


@pytest.mark.parametrize("argv, found", [
    ([DEFER, PP, "2"], []),
    ([DEFER, PP, "2", "--wgrad-deferral-limit", "0"], []),
    ([PP, "2", "--wgrad-deferral-limit", "-1"], []),
    ([DEFER],
     [(f"{DEFER} needs pipeline parallelism", (DEFER, PP),
       "drop it, or use --pipeline-model-parallel-size 2 or more")]),
    ([DEFER, PP, "2", "--no-gradient-accumulation-fusion"],
     [(f"{DEFER} needs gradient accumulation fusion, which --no-gradient-accumulation-fusion "
       "turns off", (DEFER, "--no-gradient-accumulation-fusion"),
       "drop --no-gradient-accumulation-fusion")]),
    ([DEFER, PP, "2", "--wgrad-deferral-limit", "-1"],
     [("--wgrad-deferral-limit -1 must not be negative", ("--wgrad-deferral-limit",),
       "use 0 or more")]),
    ([DEFER, "--no-gradient-accumulation-fusion", "--wgrad-deferral-limit", "-2"],
     [(f"{DEFER} needs pipeline parallelism", (DEFER, PP),
       "drop it, or use --pipeline-model-parallel-size 2 or more"),
      (f"{DEFER} needs gradient accumulation fusion, which --no-gradient-accumulation-fusion "
       "turns off", (DEFER, "--no-gradient-accumulation-fusion"),
       "drop --no-gradient-accumulation-fusion"),
      ("--wgrad-deferral-limit -2 must not be negative", ("--wgrad-deferral-limit",),
       "use 0 or more")]),
])
def test_deferred_embedding_gradients(argv, found):
    assert whole(argv) == found


@pytest.mark.parametrize("argv, found", [
    # a layout validate_args rejects (stage count, symbol) is not judged again
    ([PP, "2", LAYOUT, "ttt|tt|tttEL"], []),
    ([PP, "2", LAYOUT, "tttx|ttttEL"], []),
    # nor a layout over a pipeline size below one
    ([PP, "-1", LAYOUT, "ttttttttEL"],
     [(f"{PP} -1 must be at least 1", (PP,), "use 1 for no pipeline parallelism")]),
    # no layers: the first stage's one layer leaves -1 for the last, as Megatron computes
    (["--num-layers", "0", PP, "2", FIRST, "1"],
     [("--num-layers 0 must be at least 1", ("--num-layers",),
       "give the model at least one layer")]),
])
def test_a_split_validate_args_already_rejects_is_not_judged_again(argv, found):
    assert whole(argv, others=True) == found


@pytest.mark.parametrize("argv, found", [
    # uneven stages or a layout (its 4 stages make 2 virtual stages per rank) conflict with
    # accounting; the accounted split (5 layers a rank) is then not judged as well
    ([PP, "2", VPP, "2", FIRST, "2", EMBEDDING, LOSS],
     [(f"{FIRST} cannot be combined with {EMBEDDING} / {LOSS}", (FIRST, EMBEDDING, LOSS),
       UNEVEN_WITH_ACCOUNTING_HINT)]),
    ([PP, "2", LAYOUT, "Ett|tt|tt|ttL", EMBEDDING, LOSS],
     [(f"{LAYOUT} cannot be combined with {EMBEDDING}, {LOSS}", (LAYOUT, EMBEDDING, LOSS),
       "describe the split in the layout alone")]),
])
def test_accounting_is_judged_only_without_uneven_stages_or_a_layout(argv, found):
    assert whole(argv) == found


HYBRID = "--hybrid-layer-pattern"


@pytest.mark.parametrize("argv, found", [
    # validate_args checks the accounted layer count itself except for hybrid models (and
    # rejects accounting with a hybrid pattern: the experimental plugin's problem)
    ([HYBRID, "MMMMMMMM", PP, "2", LOSS],
     [("9 layers (counting the embedding / loss) cannot be split evenly over "
       f"{PP} 2", (LOSS, "--num-layers", PP), "use a layer count that makes a multiple of 2")]),
    ([HYBRID, "MMMMMMM", PP, "2", LOSS], []),
    ([HYBRID, "MMMMMMMMMMM", PP, "4", EMBEDDING, LOSS],
     [("13 layers (counting the embedding / loss) cannot be split evenly over "
       f"{PP} 4", (EMBEDDING, LOSS, "--num-layers", PP),
       "use a layer count that makes a multiple of 4")]),
    # no layers: the loss alone is 1 layer, not divisible by 2 (validate_args' problem)
    (["--num-layers", "0", PP, "2", VPP, "2", LOSS],
     [("--num-layers 0 must be at least 1", ("--num-layers",),
       "give the model at least one layer")]),
])
def test_accounted_layers_of_hybrid_models_divide_over_stages(argv, found):
    assert whole(argv, others=True) == found
