"""Every size and divisibility rule of the built-in plugins at the smallest values that matter.

A rule such as "the world holds a whole number of model replicas" is tested at 1, at 2 and
at the divisor itself, on both sides of the line, so that moving the line (``> 1`` to
``> 2``, ``%`` to ``//``) fails a test. The tests go through ``megaplug.resolve`` and find a
rule's problem by the flags it names, never by the plugin or module that holds the rule.
"""

from __future__ import annotations

from typing import Optional

import pytest

import megaplug
from megaplug.testing import resolve

WORLD = "WORLD_SIZE"
TP = "--tensor-model-parallel-size"
PP = "--pipeline-model-parallel-size"
CP = "--context-parallel-size"
HIERARCHICAL_CP = "--hierarchical-context-parallel-sizes"
LAYERS = "--num-layers"
PER_VIRTUAL_STAGE = "--num-layers-per-virtual-pipeline-stage"
HEADS = "--num-attention-heads"
SEQ = "--seq-length"
MICRO = "--micro-batch-size"
GLOBAL = "--global-batch-size"
INSTANCES = "--num-distributed-optimizer-instances"


def outcome(*argv: str, world: int = 1) -> tuple[Optional[megaplug.Resolved], list]:
    """The resolved configuration (or None) and every problem of the minimal launch plus
    ``argv`` on ``world`` processes."""
    try:
        return resolve(*argv, environ={"WORLD_SIZE": str(world), "RANK": "0"}), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


def naming(problems: list, *flags: str) -> list:
    """The problems (or warnings) that name every one of ``flags``."""
    return [p for p in problems if set(flags) <= set(p.flags)]


def assert_rule(flags: tuple[str, ...], argv: tuple[str, ...], world: int,
                rejected: bool) -> Optional[megaplug.Resolved]:
    resolved, problems = outcome(*argv, world=world)
    found = naming(problems, *flags)
    if rejected:
        assert found, f"expected a problem naming {flags}, got {[str(p) for p in problems]}"
    else:
        assert problems == [], [str(p) for p in problems]
    return resolved


# -- the world holds a whole number of model replicas ---------------------------------


@pytest.mark.parametrize("world, argv, rejected, data_parallel", [
    (1, (), False, 1),
    (2, (), False, 2),
    (1, (TP, "2"), True, None),
    (2, (TP, "2"), False, 1),           # the divisor itself
    (3, (TP, "2"), True, None),
    (4, (TP, "2"), False, 2),
    (2, (PP, "2"), False, 1),
    (1, (PP, "2"), True, None),
    (2, (CP, "2"), False, 1),
    (1, (CP, "2"), True, None),
    (2, (TP, "2", PP, "2"), True, None),  # 4 ranks per replica
    (4, (TP, "2", PP, "2"), False, 1),
    (8, (TP, "2", CP, "2"), False, 2),
    (6, (TP, "2", CP, "2"), True, None),
])
def test_world_size_divisible_by_the_model_parallel_size(world, argv, rejected, data_parallel):
    resolved = assert_rule((WORLD,), argv, world, rejected)
    if not rejected:
        assert resolved.data_parallel_size == data_parallel


@pytest.mark.parametrize("flag", [TP, PP, CP])
@pytest.mark.parametrize("size, rejected", [(0, True), (1, False)])
def test_parallel_sizes_are_at_least_one(flag, size, rejected):
    resolved, problems = outcome(flag, str(size))
    assert bool(naming(problems, flag)) is rejected
    if rejected:
        assert any(f"{flag} is 0" in p.message for p in naming(problems, flag))
    else:
        assert resolved[flag.lstrip("-").replace("-", "_")] == 1


def test_a_negative_parallel_size_is_resolved_with_a_warning():
    resolved, problems = outcome(TP, "-1", GLOBAL, "1", world=1)
    assert problems == [], [str(p) for p in problems]
    assert naming(resolved.warnings, TP)
    assert resolved.data_parallel_size == -1   # Megatron's integer arithmetic


# -- hierarchical context parallelism multiplies to the context-parallel size ----------


@pytest.mark.parametrize("cp, sizes, rejected", [
    (1, ("1",), False),
    (2, ("2",), False),
    (2, ("1", "2"), False),
    (2, ("1",), True),
    (2, ("2", "2"), True),
    (4, ("2", "2"), False),
    (4, ("2",), True),
])
def test_hierarchical_context_parallel_sizes_multiply_to_cp(cp, sizes, rejected):
    assert_rule((HIERARCHICAL_CP, CP), (CP, str(cp), SEQ, "128", HIERARCHICAL_CP, *sizes),
                cp, rejected)


# -- layers split evenly over pipeline stages ----------------------------------------


@pytest.mark.parametrize("pp, layers, rejected", [
    (1, 1, False),
    (1, 3, False),
    (2, 1, True),
    (2, 2, False),     # the divisor itself
    (2, 3, True),
    (2, 4, False),
    (3, 3, False),
    (3, 4, True),
])
def test_layers_split_evenly_over_pipeline_stages(pp, layers, rejected):
    assert_rule((LAYERS, PP), (PP, str(pp), LAYERS, str(layers)), pp, rejected)


def test_the_embedding_counts_in_the_split_when_asked():
    assert_rule((LAYERS, PP), (PP, "2", LAYERS, "2", "--account-for-embedding-in-pipeline-split"),
                2, True)
    assert_rule((LAYERS, PP), (PP, "2", LAYERS, "3", "--account-for-embedding-in-pipeline-split"),
                2, False)


# -- virtual pipeline stages -----------------------------------------------------------


@pytest.mark.parametrize("pp, layers, per_stage, rejected, virtual", [
    (2, 4, 1, False, 2),
    (2, 4, 2, False, None),    # one virtual stage per stage is no interleaving
    (2, 4, 3, True, None),
    (2, 2, 1, False, None),
    (2, 8, 2, False, 2),
    (2, 8, 3, True, None),
    (3, 6, 1, False, 2),
])
def test_layers_per_virtual_stage_divide_a_pipeline_stage(pp, layers, per_stage, rejected,
                                                          virtual):
    resolved = assert_rule((PER_VIRTUAL_STAGE, LAYERS),
                           (PP, str(pp), LAYERS, str(layers), PER_VIRTUAL_STAGE, str(per_stage),
                            GLOBAL, str(pp)),  # the interleaved schedule needs PP micro-batches
                           pp, rejected)
    if not rejected:
        assert resolved.virtual_pipeline_model_parallel_size == virtual


def test_zero_layers_per_virtual_stage_is_refused():
    _, problems = outcome(PP, "2", LAYERS, "4", PER_VIRTUAL_STAGE, "0", world=2)
    assert [p.message for p in naming(problems, PER_VIRTUAL_STAGE)] == [
        "--num-layers-per-virtual-pipeline-stage is 0; a virtual stage needs at least one layer"]


@pytest.mark.parametrize("pp, overlap, rejected", [
    (1, (), True),
    (2, (), False),
    (1, ("--no-overlap-p2p-communication",), True),
    (2, ("--no-overlap-p2p-communication",), True),
    (3, ("--no-overlap-p2p-communication",), False),
])
def test_the_interleaved_schedule_needs_enough_pipeline_stages(pp, overlap, rejected):
    argv = (PP, str(pp), LAYERS, str(2 * pp), "--num-virtual-stages-per-pipeline-rank", "2",
            GLOBAL, str(pp), *overlap)
    assert_rule((PP,), argv, pp, rejected)


# -- sequence parallelism needs tensor parallelism ---------------------------------------


@pytest.mark.parametrize("tp, kept", [(1, False), (2, True)])
def test_sequence_parallel_is_turned_off_without_tensor_parallelism(tp, kept):
    resolved, problems = outcome(TP, str(tp), "--sequence-parallel", world=tp)
    assert problems == []
    assert resolved.sequence_parallel is kept
    assert bool(naming(resolved.warnings, "--sequence-parallel")) is not kept


# -- distributed optimizer instances split the data x context group --------------------


@pytest.mark.parametrize("world, instances, split_warning", [
    (1, 1, False),
    (2, 2, False),     # the divisor itself
    (1, 2, True),
    (3, 2, True),
    (4, 2, False),
])
def test_distributed_optimizer_instances_split_the_data_parallel_ranks(world, instances,
                                                                       split_warning):
    resolved, problems = outcome("--use-distributed-optimizer", INSTANCES, str(instances),
                                 world=world)
    assert problems == []
    split = [w for w in naming(resolved.warnings, INSTANCES) if "equal groups" in w.message]
    assert bool(split) is split_warning


def test_zero_distributed_optimizer_instances_is_suspicious():
    resolved, problems = outcome("--use-distributed-optimizer", INSTANCES, "0")
    assert problems == []
    assert naming(resolved.warnings, INSTANCES)


# -- attention heads divide the hidden size ---------------------------------------------


@pytest.mark.parametrize("heads, rejected", [
    (1, False), (2, False), (3, True), (64, False), (128, True),
])
def test_attention_heads_divide_the_hidden_size(heads, rejected):
    resolved = assert_rule(("--hidden-size", HEADS), (HEADS, str(heads)), 1, rejected)
    if not rejected:
        assert resolved.kv_channels == 64 // heads


# -- context parallelism: two chunks of the sequence per rank ---------------------------


@pytest.mark.parametrize("cp, seq, rejected", [
    (1, 1, False),
    (1, 3, False),
    (2, 4, False),     # 2 x CP itself
    (2, 2, True),
    (2, 6, True),
    (2, 8, False),
    (3, 6, False),
    (3, 9, True),
])
def test_sequence_length_holds_two_chunks_per_context_parallel_rank(cp, seq, rejected):
    assert_rule((SEQ, CP), (CP, str(cp), SEQ, str(seq), "--max-position-embeddings", str(seq)),
                cp, rejected)


# -- checkpoint retention ---------------------------------------------------------------


@pytest.mark.parametrize("interval, retain, rejected", [
    ("1", None, False),
    ("0", None, True),
    ("1", "1", False),
    ("2", "2", False),     # the interval itself
    ("2", "1", True),
    ("2", "3", True),
    ("2", "4", False),
    ("2", "0", True),
])
def test_checkpoints_are_saved_and_retained_at_positive_multiples(interval, retain, rejected):
    argv = ["--save", "/ckpt", "--save-interval", interval]
    if retain is not None:
        argv += ["--save-retain-interval", retain]
    flags = ("--save-retain-interval",) if retain is not None else ("--save-interval",)
    assert_rule(flags, tuple(argv), 1, rejected)


# -- batch sizes -------------------------------------------------------------------------


@pytest.mark.parametrize("micro, rejected", [("0", True), ("1", False), ("-1", True)])
def test_the_micro_batch_size_is_positive(micro, rejected):
    assert_rule((MICRO,), (MICRO, micro), 1, rejected)


@pytest.mark.parametrize("world, micro, given, rejected, derived", [
    (1, 1, None, False, 1),
    (2, 1, None, False, 2),
    (2, 2, None, False, 4),
    (1, 1, "1", False, 1),
    (2, 1, "2", False, 2),     # one micro batch per rank
    (2, 1, "1", True, None),
    (2, 1, "3", True, None),
    (2, 2, "2", True, None),
    (2, 2, "4", False, 4),
    (1, 2, "3", True, None),
    (1, 1, "0", True, None),
])
def test_the_global_batch_splits_into_micro_batches_on_every_rank(world, micro, given,
                                                                  rejected, derived):
    argv = (MICRO, str(micro)) + ((GLOBAL, given) if given is not None else ())
    resolved = assert_rule((GLOBAL,), argv, world, rejected)
    if not rejected:
        assert resolved.global_batch_size == derived


@pytest.mark.parametrize("world, eval_micro, eval_global, rejected", [
    (1, "1", "1", False),
    (2, "1", "2", False),
    (2, "1", "1", True),
    (2, "2", "2", True),
    (2, "2", "4", False),
    (1, "2", "3", True),
])
def test_evaluation_batches_split_into_micro_batches_on_every_rank(world, eval_micro,
                                                                   eval_global, rejected):
    argv = (MICRO, "1", "--eval-micro-batch-size", eval_micro,
            "--eval-global-batch-size", eval_global)
    assert_rule(("--eval-global-batch-size", "--eval-micro-batch-size"), argv, world, rejected)


# -- hybrid patterns: pipeline segments over pipeline ranks ------------------------------


@pytest.mark.parametrize("pattern, pp, rejected, virtual", [
    ("M-M-", 1, False, None),
    ("M-M-", 2, False, None),       # one segment: the model splits it at build time
    ("M-|M-", 2, False, None),      # one segment per rank
    ("M-|M-", 3, True, None),
    ("M-|M-|M-", 2, True, None),
    ("M-|M-|M-|M-", 2, False, 2),
])
def test_hybrid_pattern_segments_divide_over_pipeline_ranks(pattern, pp, rejected, virtual):
    resolved = assert_rule(("--hybrid-layer-pattern", PP),
                           ("--hybrid-layer-pattern", pattern, PP, str(pp), GLOBAL, str(pp)),
                           pp, rejected)
    if not rejected:
        assert resolved.virtual_pipeline_model_parallel_size == virtual


# -- sharded saved activations need tensor parallelism ----------------------------------


@pytest.mark.parametrize("tp, rejected", [(1, True), (2, False)])
def test_distributed_saved_activations_need_tensor_parallelism(tp, rejected):
    assert_rule(("--distribute-saved-activations", TP),
                ("--distribute-saved-activations", "--recompute-granularity", "full",
                 "--recompute-method", "uniform", "--recompute-num-layers", "1", TP, str(tp)),
                tp, rejected)


# -- torch_dcp checkpoints and model parallelism ----------------------------------------


@pytest.mark.parametrize("tp, rejected", [(1, False), (2, True)])
def test_torch_dcp_checkpoints_refuse_tensor_parallelism_from_two(tp, rejected):
    assert_rule(("--ckpt-format", TP),
                ("--ckpt-format", "torch_dcp", "--use-torch-fsdp2",
                 "--untie-embeddings-and-output-weights", "--no-gradient-accumulation-fusion",
                 TP, str(tp)), tp, rejected)


# -- local CUDA graphs of dynamic batching: a positive count or -1 -----------------------


@pytest.mark.parametrize("count, rejected", [("-2", True), ("-1", False), ("0", True),
                                             ("1", False), ("2", False)])
def test_local_cuda_graph_count_is_positive_or_automatic(count, rejected):
    assert_rule(("--inference-dynamic-batching-num-cuda-graphs",),
                ("--cuda-graph-impl", "local", "--inference-dynamic-batching-num-cuda-graphs",
                 count), 1, rejected)


# -- uneven first and last pipeline stages: at least one layer ---------------------------


@pytest.mark.parametrize("flag", ["--decoder-first-pipeline-num-layers",
                                  "--decoder-last-pipeline-num-layers"])
@pytest.mark.parametrize("layers, suspicious", [("0", True), ("1", False), ("2", False)])
def test_an_uneven_stage_holds_at_least_one_layer(flag, layers, suspicious):
    # Megatron's validate_args accepts 0 (only the model build fails: pre-flight's check)
    resolved, problems = outcome("-p", "no:preflight", PP, "2", LAYERS, "4", flag, layers,
                                 world=2)
    assert problems == [], [str(p) for p in problems]
    assert bool(naming(resolved.warnings, flag)) is suspicious
