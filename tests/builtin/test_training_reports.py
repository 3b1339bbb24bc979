"""What each batch-size and schedule rule reports, whole: the message, every flag it names and
the hint; and for each derivation, the value, why and from what.

Through ``megaplug.resolve`` with every installed plugin. A problem is found by the flags it
names, not by the plugin or module that holds the rule.
"""

from __future__ import annotations

import pytest

import megaplug
from megaplug.testing import resolve

REQUIRED = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "128", "--max-position-embeddings", "128"]


def problems(*argv: str, world: int = 1) -> list:
    try:
        resolve(*argv, environ={"WORLD_SIZE": str(world)})
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


def reported(found: list, *flags: str) -> list[tuple]:
    """(message, flags, hint) of each problem naming all of ``flags``."""
    return [(p.message, tuple(p.flags), p.hint) for p in found if set(flags) <= set(p.flags)]


def provenance(resolved: megaplug.Resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


GLOBAL_HINT = ("use a positive global batch size, or leave it out to default to micro batch "
               "size times data-parallel size")
DECAY_HINT = ("use --weight-decay for a constant decay, or set --weight-decay-incr-style linear "
              "or cosine")
ITERATION_HINT = ("count everything in iterations (--lr-decay-iters, --lr-warmup-iters), or "
                  "train by samples with --train-samples instead")
SAMPLE_HINT = ("count everything in samples (--lr-decay-samples, --lr-warmup-samples), or train "
               "by iterations with --train-iters instead")


@pytest.mark.parametrize("argv, world, expected", [
    (("--micro-batch-size", "-2"), 1,
     ("--micro-batch-size -2 must be positive", ("--micro-batch-size",),
      "use a micro batch size of 1 or more")),
    (("--global-batch-size", "-4"), 1,
     ("--global-batch-size -4 must be positive", ("--global-batch-size",), GLOBAL_HINT)),
    (("--global-batch-size", "0"), 1,
     ("--global-batch-size 0 must be positive", ("--global-batch-size",), GLOBAL_HINT)),
    (("--step-batch-size-schedule", "0:8", "--global-batch-size", "8"), 1,
     ("--step-batch-size-schedule and --global-batch-size cannot be used together",
      ("--step-batch-size-schedule", "--global-batch-size"),
      "the schedule sets the global batch size; drop --global-batch-size")),
    (("--global-batch-size", "3", "--micro-batch-size", "2"), 1,
     ("--global-batch-size 3 must be divisible by --micro-batch-size 2 x batch-parallel size 1 = 2 "
      "(evaluation batch sizes default to the training ones)",
      ("--global-batch-size", "--micro-batch-size", "data_parallel_size"),
      "use a batch size that is a multiple of 2 (such as 2 or 4), or --micro-batch-size 1")),
    (("--global-batch-size", "10", "--micro-batch-size", "3"), 2,
     ("--global-batch-size 10 must be divisible by --micro-batch-size 3 x batch-parallel size 2 = "
      "6 (evaluation batch sizes default to the training ones)",
      ("--global-batch-size", "--micro-batch-size", "data_parallel_size"),
      "use a batch size that is a multiple of 6 (such as 6 or 12), or --micro-batch-size 1")),
    (("--global-batch-size", "4", "--micro-batch-size", "3"), 1,
     ("--global-batch-size 4 must be divisible by --micro-batch-size 3 x batch-parallel size 1 = 3 "
      "(evaluation batch sizes default to the training ones)",
      ("--global-batch-size", "--micro-batch-size", "data_parallel_size"),
      "use a batch size that is a multiple of 3 (such as 3 or 6), or --micro-batch-size 2")),
    (("--global-batch-size", "2", "--micro-batch-size", "3"), 1,
     ("--global-batch-size 2 must be divisible by --micro-batch-size 3 x batch-parallel size 1 = 3 "
      "(evaluation batch sizes default to the training ones)",
      ("--global-batch-size", "--micro-batch-size", "data_parallel_size"),
      "use a batch size that is a multiple of 3 (such as 3), or --micro-batch-size 2")),
    (("--eval-global-batch-size", "10", "--eval-micro-batch-size", "3"), 2,
     ("--eval-global-batch-size 10 must be divisible by --eval-micro-batch-size 3 x batch-parallel "
      "size 2 = 6", ("--eval-global-batch-size", "--eval-micro-batch-size", "data_parallel_size"),
      "use a batch size that is a multiple of 6 (such as 6 or 12), or --eval-micro-batch-size 1")),
    (("--global-batch-size", "4", "--eval-micro-batch-size", "0"), 2,
     ("--eval-micro-batch-size is 0; evaluation needs at least one sample per micro batch",
      ("--eval-micro-batch-size",), "use --eval-micro-batch-size 1 or more")),
    (("--weight-decay-incr-style", "constant", "--start-weight-decay", "0.1"), 1,
     ("--start-weight-decay needs a varying weight-decay schedule, but --weight-decay-incr-style "
      "is constant", ("--start-weight-decay", "--weight-decay-incr-style"), DECAY_HINT)),
    (("--end-weight-decay", "0.1"), 1,
     ("--end-weight-decay needs a varying weight-decay schedule, but --weight-decay-incr-style "
      "is constant", ("--end-weight-decay", "--weight-decay-incr-style"), DECAY_HINT)),
    (("--start-weight-decay", "0.1", "--end-weight-decay", "0.2"), 1,
     ("--start-weight-decay and --end-weight-decay need a varying weight-decay schedule, but "
      "--weight-decay-incr-style is constant",
      ("--start-weight-decay", "--end-weight-decay", "--weight-decay-incr-style"), DECAY_HINT)),
    (("--weight-decay-incr-style", "linear"), 1,
     ("--weight-decay-incr-style linear needs --start-weight-decay and --end-weight-decay",
      ("--weight-decay-incr-style", "--start-weight-decay", "--end-weight-decay"),
      "give both the start and the end weight decay")),
    (("--weight-decay-incr-style", "cosine", "--start-weight-decay", "0.1"), 1,
     ("--weight-decay-incr-style cosine needs --end-weight-decay",
      ("--weight-decay-incr-style", "--end-weight-decay"),
      "give both the start and the end weight decay")),
    (("--weight-decay-incr-style", "cosine", "--end-weight-decay", "0.1"), 1,
     ("--weight-decay-incr-style cosine needs --start-weight-decay",
      ("--weight-decay-incr-style", "--start-weight-decay"),
      "give both the start and the end weight decay")),
    (("--train-iters", "10", "--train-samples", "100"), 1,
     ("--train-iters sets iteration-based training, which cannot be combined with "
      "--train-samples", ("--train-iters", "--train-samples"), ITERATION_HINT)),
    (("--train-iters", "10", "--lr-decay-samples", "100", "--lr-warmup-samples", "5"), 1,
     ("--train-iters sets iteration-based training, which cannot be combined with "
      "--lr-decay-samples, --lr-warmup-samples",
      ("--train-iters", "--lr-decay-samples", "--lr-warmup-samples"), ITERATION_HINT)),
    (("--train-samples", "100", "--lr-decay-iters", "10", "--lr-warmup-iters", "5"), 1,
     ("--train-samples sets sample-based training, which cannot be combined with "
      "--lr-decay-iters, --lr-warmup-iters",
      ("--train-samples", "--lr-decay-iters", "--lr-warmup-iters"), SAMPLE_HINT)),
    (("--train-iters", "10", "--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "5"), 1,
     ("--lr-warmup-fraction and --lr-warmup-iters both set the warmup length",
      ("--lr-warmup-fraction", "--lr-warmup-iters"), "keep one of them")),
    (("--train-samples", "100", "--lr-warmup-fraction", "0.1", "--lr-warmup-samples", "5"), 1,
     ("--lr-warmup-fraction and --lr-warmup-samples both set the warmup length",
      ("--lr-warmup-fraction", "--lr-warmup-samples"), "keep one of them")),
    (("--lr", "0.1", "--min-lr", "0.2"), 1,
     ("--min-lr 0.2 is above --lr 0.1", ("--min-lr", "--lr"), "use a --min-lr of at most 0.1")),
    (("--lr", "nan", "--min-lr", "0.2"), 1,  # refused as given: the floor is not compared
     ("--lr: 'nan' is not a finite number", ("--lr",), "give --lr a finite float value")),
])
def test_each_rule_reports_its_message_flags_and_hint(argv, world, expected):
    assert reported(problems(*argv, world=world), *expected[1]) == [expected]


def test_a_missing_micro_batch_size_is_required():
    with pytest.raises(megaplug.ConfigError) as info:
        megaplug.resolve(REQUIRED, environ={})
    assert reported(list(info.value.problems), "--micro-batch-size") == [
        ("--micro-batch-size is required", ("--micro-batch-size",),
         "set --micro-batch-size to the samples each GPU processes per step")]


@pytest.mark.parametrize("min_lr, rejected", [("0.1", False), ("0.09", False), ("0.11", True)])
def test_the_learning_rate_floor_may_equal_the_peak(min_lr, rejected):
    assert bool(reported(problems("--lr", "0.1", "--min-lr", min_lr), "--min-lr")) is rejected


@pytest.mark.parametrize("argv", [
    ("--train-iters", "10", "--lr-decay-iters", "10", "--lr-warmup-iters", "2"),
    ("--train-samples", "100", "--lr-decay-samples", "100", "--lr-warmup-samples", "5"),
    ("--train-iters", "10", "--lr-warmup-samples", "0"),
    ("--train-iters", "10", "--skip-train", "--lr-decay-samples", "100"),
    ("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.1",
     "--end-weight-decay", "0.2"),
    ("--train-iters", "10", "--lr-warmup-fraction", "0.1"),
])
def test_consistent_schedules_are_accepted(argv):
    assert problems(*argv) == []


def test_a_given_global_batch_size_with_a_step_schedule_given_by_file(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("global_batch_size: 8\n")
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--config", str(config), "--step-batch-size-schedule", "0:8")
    assert reported(list(info.value.problems), "--step-batch-size-schedule")


def test_a_caller_default_global_batch_size_goes_with_a_step_schedule():
    """Caller defaults come after Megatron's "given" bookkeeping, as in Megatron."""
    resolved = resolve("--step-batch-size-schedule", "0:8",
                       defaults={"global_batch_size": 8})
    assert resolved.global_batch_size == 8


@pytest.mark.parametrize("world, micro, expected", [(1, 1, 1), (2, 1, 2), (2, 3, 6)])
def test_the_global_batch_defaults_to_one_micro_batch_per_rank(world, micro, expected):
    resolved = resolve("--micro-batch-size", str(micro), environ={"WORLD_SIZE": str(world)})
    assert provenance(resolved, "global_batch_size") == (
        expected, "derived", "one micro batch per batch-parallel rank",
        ("micro_batch_size", "world_size", "tensor_model_parallel_size",
         "pipeline_model_parallel_size", "context_parallel_size"))


def test_evaluation_batch_sizes_default_to_the_training_ones():
    resolved = resolve("--micro-batch-size", "2", environ={"WORLD_SIZE": "2"})
    assert provenance(resolved, "eval_global_batch_size") == (
        4, "derived", "defaults to the training global batch size", ("global_batch_size",))
    assert provenance(resolved, "eval_micro_batch_size") == (
        2, "derived", "defaults to the training micro batch size", ("micro_batch_size",))


def test_given_evaluation_batch_sizes_are_kept():
    resolved = resolve("--eval-global-batch-size", "6", "--eval-micro-batch-size", "3",
                       environ={"WORLD_SIZE": "2"})
    assert (resolved.eval_global_batch_size, resolved.eval_micro_batch_size) == (6, 3)


def test_a_constant_weight_decay_starts_and_ends_at_weight_decay():
    resolved = resolve("--weight-decay", "0.05")
    for dest in ("start_weight_decay", "end_weight_decay"):
        assert provenance(resolved, dest) == (0.05, "derived", "constant weight-decay schedule",
                                              ("weight_decay", "weight_decay_incr_style"))


def test_a_varying_weight_decay_keeps_its_range():
    resolved = resolve("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.1",
                       "--end-weight-decay", "0.2")
    assert (resolved.start_weight_decay, resolved.end_weight_decay) == (0.1, 0.2)


def test_both_scheduler_sources_are_a_warning():
    resolved = resolve("--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler")
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings
            if "--override-opt_param-scheduler" in w.flags] == [
        ("--override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler are both set; "
         "the scheduler will refuse this when it is built",
         ("--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler"))]


# -- the batch-parallel size: the world over one model-parallel group ------------------


@pytest.mark.parametrize("argv, world, expected", [
    (("--micro-batch-size", "2"), 2, 4),
    (("-p", "no:gtp", "--micro-batch-size", "2"), 2, 4),        # no GTP: remat size 1
    (("--micro-batch-size", "2", "--tensor-parallel-num-weight-shards", "2"), 4, 8),
])
def test_the_global_batch_counts_gtp_remat_ranks(argv, world, expected):
    assert resolve(*argv, environ={"WORLD_SIZE": str(world)}).global_batch_size == expected


class RestatedGlobalBatch:
    """A plugin that restates the global batch size it was given (a normalization)."""

    megaplug_plugin = megaplug.PluginInfo(name="restated_global_batch", before=("training",))

    @megaplug.hookimpl
    def normalize(self, config) -> None:
        if config.global_batch_size is not None:
            config.set("global_batch_size", config.global_batch_size, reason="restated")


def test_a_global_batch_given_then_restated_still_counts_as_given():
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--global-batch-size", "8", "--step-batch-size-schedule", "0:8",
                plugins=[RestatedGlobalBatch()])
    assert reported(list(info.value.problems), "--step-batch-size-schedule")


# -- what the evaluation check leaves to other rules ------------------------------------


@pytest.mark.parametrize("argv, environ, only", [
    (("--micro-batch-size", "0", "--global-batch-size", "4"), {},
     "--micro-batch-size 0 must be positive"),
    (("--micro-batch-size", "0"), {}, "--micro-batch-size 0 must be positive"),
    (("--global-batch-size", "0", "--eval-micro-batch-size", "0"), {},
     "--global-batch-size 0 must be positive"),
    ((), {"WORLD_SIZE": "0"}, "WORLD_SIZE is 0; a job needs at least one process"),
    (("--global-batch-size", "4"), {"WORLD_SIZE": "0"},
     "WORLD_SIZE is 0; a job needs at least one process"),
    (("--tensor-model-parallel-size", "0"), {},
     "--tensor-model-parallel-size is 0; it must be at least 1"),
])
def test_one_mistake_in_the_training_batch_is_one_problem(argv, environ, only):
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*argv, environ=environ)
    assert [p.message for p in info.value.problems] == [only]


def test_a_derived_global_batch_that_is_not_positive_names_the_world():
    found = problems(world=-2)
    assert reported(found, "WORLD_SIZE") == [
        ("the global batch size defaults to micro batch size x data-parallel size = -2, which "
         "is not positive", ("--micro-batch-size", "data_parallel_size", "WORLD_SIZE"),
         "check WORLD_SIZE and the parallel sizes, or give --global-batch-size")]


def test_without_the_logging_plugin_evaluation_uses_the_training_batch_sizes():
    found = problems("-p", "no:logging", "--global-batch-size", "3", "--micro-batch-size", "2")
    assert [m for m, _, _ in reported(found, "--global-batch-size")] == [
        "--global-batch-size 3 must be divisible by --micro-batch-size 2 x batch-parallel size 1 "
        "= 2 (evaluation batch sizes default to the training ones)"]


def test_the_evaluation_check_counts_gtp_remat_ranks():
    found = problems("--tensor-model-parallel-size", "2", "--tensor-parallel-num-weight-shards",
                     "4", "--global-batch-size", "3", world=4)
    assert reported(found, "--global-batch-size") == [
        ("--global-batch-size 3 must be divisible by --micro-batch-size 1 x batch-parallel size 2 "
         "(data_parallel_size 1 x gtp_weight_remat_size 2) = 2 (evaluation batch sizes default "
         "to the training ones)",
         ("--global-batch-size", "--micro-batch-size", "data_parallel_size"),
         "use a batch size that is a multiple of 2 (such as 2 or 4)")]


@pytest.mark.parametrize("flag", ["--override-opt_param-scheduler",
                                  "--use-checkpoint-opt_param-scheduler"])
def test_one_scheduler_source_alone_is_fine(flag):
    resolved = resolve(flag)
    assert [w for w in resolved.warnings if flag in w.flags] == []


def test_without_the_parallel_plugin_the_world_is_one_rank():
    resolved = resolve("-p", "no:parallel", "--micro-batch-size", "2",
                       environ={"WORLD_SIZE": "4"})
    assert resolved.global_batch_size == 2


# -- "was --global-batch-size given?": Megatron's _is_global_batch_size_explicitly_specified --

FACADE_BASE = [*REQUIRED, "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
               "--step-batch-size-schedule", "0:8"]


def facade_step_schedule_problems(argv: list[str], *, edit_global_batch: int | None = None,
                                  defaults: dict | None = None) -> list:
    """The step-schedule problems of Megatron's parse_args then validate_args (the facade)."""
    from megaplug.megatron import ConfigError, parse_args, validate_args

    environ = {"RANK": "0", "WORLD_SIZE": "1"}
    args = parse_args(argv=[*FACADE_BASE, *argv], environ=environ)
    if edit_global_batch is not None:
        args.global_batch_size = edit_global_batch
    try:
        validate_args(args, defaults, environ=environ, torch_types=False,
                      target=megaplug.TargetEnvironment(device_capability=(9, 0)))
    except ConfigError as error:
        return reported(list(error.problems), "--step-batch-size-schedule")
    return []


STEP_AND_GLOBAL = [("--step-batch-size-schedule and --global-batch-size cannot be used together",
                    ("--step-batch-size-schedule", "--global-batch-size"),
                    "the schedule sets the global batch size; drop --global-batch-size")]


def test_the_facade_and_resolve_agree_on_a_given_global_batch():
    """Megatron records whether the parsed arguments held a global batch size; megaplug reads
    the same fact off the value's provenance, whichever entry point resolved it."""
    assert facade_step_schedule_problems(["--global-batch-size", "8"]) == STEP_AND_GLOBAL
    assert reported(problems(*FACADE_BASE, "--global-batch-size", "8"),
                    "--step-batch-size-schedule") == STEP_AND_GLOBAL


def test_a_global_batch_set_after_parsing_was_not_given():
    # Megatron: _is_global_batch_size_explicitly_specified is False after parse_args, so a
    # caller that sets args.global_batch_size or passes args_defaults is not refused
    assert facade_step_schedule_problems([], edit_global_batch=8) == []
    assert facade_step_schedule_problems([], defaults={"global_batch_size": 8}) == []


def test_a_given_global_batch_changed_after_parsing_is_still_given():
    assert facade_step_schedule_problems(["--global-batch-size", "8"],
                                         edit_global_batch=16) == STEP_AND_GLOBAL
