"""What each data rule reports, whole: the message, every flag it names and the hint; every
warning with its flags; and each derivation's value, why and from what."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import BASE, kernel, problems, resolve  # noqa: E402

import megaplug  # noqa: E402
from megaplug import PluginInfo, hookimpl  # noqa: E402

FIM = ["--fim-data", "--data-path", "d", "--split", "1"]
PACKED = ["--calculate-per-token-loss"]
DP_BALANCED = ["--sequence-packing-scheduler", "dp_balanced", *PACKED]
TE_GRAPHS = ["--cuda-graph-impl", "transformer_engine"]


def whole(argv, **kwargs) -> list[tuple]:
    return [(p.message, tuple(p.flags), p.hint) for p in problems(argv, **kwargs)]


def warned(argv, **kwargs) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolve(argv, **kwargs).warnings]


def provenance(resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, expected", [
    ([*FIM, "--mock-data"],
     [("only one data source may be given, got --mock-data and --data-path",
       ("--mock-data", "--data-path"),
       "keep one of --mock-data, --data-path or the per-split data paths"),
      ("--fim-data has no mock dataset; --mock-data cannot be used with it",
       ("--fim-data", "--mock-data"), "give a dataset with --data-path")]),
    ([*FIM, "--fim-rate", "0"],
     [("--fim-data needs a non-zero --fim-rate, got 0.0", ("--fim-data", "--fim-rate"),
       "set --fim-rate to a probability above 0")]),
    ([*FIM, "--fim-spm-rate", "0"],
     [("--fim-data needs a non-zero --fim-spm-rate, got 0.0", ("--fim-data", "--fim-spm-rate"),
       "set --fim-spm-rate to a probability above 0")]),
    (["--use-varlen-dataset", "--sft", *PACKED],
     [("--use-varlen-dataset and --sft cannot be used together", ("--use-varlen-dataset", "--sft"),
       "both choose the packed-sequence dataset; keep one of them")]),
    (["--use-varlen-dataset", "--varlen-sbhd-validation", "--sequence-packing-scheduler",
      "dp_balanced", "--mock-data", *PACKED],
     [("--varlen-sbhd-validation does not pack sequences, but a packing scheduler is set "
       "(dp_balanced)", ("--varlen-sbhd-validation", "--sequence-packing-scheduler"),
       "drop --sequence-packing-scheduler (and --dynamic-context-parallel)"),
      ("--varlen-sbhd-validation needs a real dataset, not --mock-data",
       ("--varlen-sbhd-validation", "--mock-data"),
       "give a dataset with --data-path, or drop --varlen-sbhd-validation")]),
    (["--sequence-packing-scheduler", "default_dynamic_cp", *PACKED],
     [("--sequence-packing-scheduler default_dynamic_cp needs --dynamic-context-parallel",
       ("--sequence-packing-scheduler",),
       "add --dynamic-context-parallel, or use the dp_balanced scheduler")]),
    (["--sequence-packing-scheduler", "dp_balanced"],
     [("sequence packing (--sequence-packing-scheduler dp_balanced) needs "
       "--calculate-per-token-loss",
       ("--sequence-packing-scheduler", "--calculate-per-token-loss"),
       "add --calculate-per-token-loss")]),
    ([*DP_BALANCED, *TE_GRAPHS, "--step-batch-size-schedule", "0:8"],
     [("CUDA graphs with the dp_balanced packing scheduler need --use-varlen-dataset and "
       "--micro-batch-size 1 (got micro batch 2)",
       ("--sequence-packing-scheduler", "--cuda-graph-impl", "--use-varlen-dataset",
        "--micro-batch-size"),
       "use --use-varlen-dataset --micro-batch-size 1, or another --cuda-graph-impl"),
      ("CUDA graphs with the dp_balanced packing scheduler need a fixed global batch size",
       ("--step-batch-size-schedule", "--cuda-graph-impl"),
       "drop --step-batch-size-schedule, or another --cuda-graph-impl")]),
    ([*DP_BALANCED, *TE_GRAPHS, "--micro-batch-size", "1"],
     [("CUDA graphs with the dp_balanced packing scheduler need --use-varlen-dataset and "
       "--micro-batch-size 1 (got micro batch 1)",
       ("--sequence-packing-scheduler", "--cuda-graph-impl", "--use-varlen-dataset",
        "--micro-batch-size"),
       "use --use-varlen-dataset --micro-batch-size 1, or another --cuda-graph-impl")]),
    (["--phase-transition-iterations", "1,x"],
     [("--phase-transition-iterations '1,x' is not a comma-separated list of iteration numbers",
       ("--phase-transition-iterations",),
       "write whole numbers separated by commas, e.g. 1000,5000")]),
    (["--data-path", "d", "--data-args-path", "f", "--split", "1"],
     [("--data-path and --data-args-path cannot be used together",
       ("--data-path", "--data-args-path"),
       "list the datasets in one place: on the command line or in the file")]),
    (["--train-data-path", "t", "--test-data-path", "v", "--per-split-data-args-path", "f"],
     [("--train-data-path, --test-data-path cannot be used together with "
       "--per-split-data-args-path",
       ("--train-data-path", "--test-data-path", "--per-split-data-args-path"),
       "give the per-split paths either on the command line or in the file")]),
    (["--mock-data", "--data-path", "d", "--split", "1", "--valid-data-path", "v"],
     [("only one data source may be given, got --mock-data and --data-path and "
       "--train/valid/test-data-path", ("--mock-data", "--data-path", "--valid-data-path"),
       "keep one of --mock-data, --data-path or the per-split data paths")]),
    (["--mock-data", "--train-data-path", "t"],
     [("only one data source may be given, got --mock-data and --train/valid/test-data-path",
       ("--mock-data", "--train-data-path"),
       "keep one of --mock-data, --data-path or the per-split data paths")]),
    (["--num-dataset-builder-threads", "0"],
     [("--num-dataset-builder-threads must be at least 1, got 0",
       ("--num-dataset-builder-threads",), "use 1 or more threads")]),
    (["--encoder-seq-length", "128"],
     [("--seq-length and --encoder-seq-length cannot both be given",
       ("--seq-length", "--encoder-seq-length"),
       "give the sequence length once, with --seq-length")]),
])
def test_each_problem_whole(argv, expected):
    assert whole(argv) == expected


def test_fim_without_its_special_tokens(tmp_path):
    config = tmp_path / "fim.yaml"
    config.write_text("fim_pad_token: null\nfim_eod_token: null\n")
    with pytest.raises(megaplug.ConfigError) as info:
        kernel().resolve([*BASE, *FIM], config_files=[str(config)], environ={},
                         target=megaplug.TargetEnvironment(device_capability=(9, 0),
                                                           environ={}))
    assert [(p.message, tuple(p.flags), p.hint) for p in info.value.problems] == [
        ("--fim-data needs its special tokens; missing --fim-pad-token, --fim-eod-token",
         ("--fim-data", "--fim-pad-token", "--fim-eod-token"), "set every FIM token")]


def test_the_sequence_length_must_be_set():
    assert whole(["--micro-batch-size", "2"], base=False) == [
        ("the sequence length is not set", ("--seq-length",),
         "pass --seq-length (or --encoder-seq-length)")]


@pytest.mark.parametrize("argv, environ", [
    ([*FIM], {}),
    (["--data-path", "d", "--split", "1", "--num-dataset-builder-threads", "1"], {}),
    (["--use-varlen-dataset", "--varlen-sbhd-validation", "--data-path", "d", "--split", "1"],
     {}),
    (["--sequence-packing-scheduler", "default_dynamic_cp", "--dynamic-context-parallel",
      *PACKED], {}),
    ([*DP_BALANCED, "--cuda-graph-impl", "local"], {}),
    ([*DP_BALANCED, *TE_GRAPHS, "--use-varlen-dataset", "--micro-batch-size", "1"], {}),
    (["--mock-data", "--data-path"], {}),  # an empty path list is no source
    (["--per-split-data-args-path", "f"], {}),
    (["--context-parallel-size", "2", "--seq-length", "132"], {"WORLD_SIZE": "2"}),
])
def test_near_misses_pass(argv, environ):
    assert resolve(argv, environ=environ).seq_length in (128, 132)


@pytest.mark.parametrize("cp, seq, rejected", [
    ("1", "130", False), ("2", "130", True), ("2", "132", False), ("4", "136", False),
    ("4", "132", True),
])
def test_the_sequence_holds_two_chunks_per_context_parallel_rank(cp, seq, rejected):
    argv, environ = ["--context-parallel-size", cp, "--seq-length", seq], {"WORLD_SIZE": cp}
    if rejected:
        double = 2 * int(cp)
        assert whole(argv, environ=environ) == [
            (f"--seq-length {seq} is not a multiple of 2 x the context-parallel size {cp} "
             f"(= {double})", ("--seq-length", "--context-parallel-size"),
             f"use a sequence length divisible by {double}")]
    else:
        assert resolve(argv, environ=environ).seq_length == int(seq)


def test_a_length_given_as_encoder_length_escapes_the_context_parallel_check():
    # Megatron checks the multiple before copying --encoder-seq-length over
    resolved = resolve(["--context-parallel-size", "2", "--encoder-seq-length", "130",
                        "--micro-batch-size", "2", "--max-position-embeddings", "256"],
                       environ={"WORLD_SIZE": "2"}, base=False)
    assert provenance(resolved, "seq_length") == (
        130, "normalized", "same as --encoder-seq-length", ("encoder_seq_length",))


def test_the_encoder_length_follows_the_sequence_length():
    assert provenance(resolve([]), "encoder_seq_length") == (
        128, "normalized", "same as --seq-length", ("seq_length",))


@pytest.mark.parametrize("threads, rejected", [("-1", True), ("0", True), ("1", False),
                                               ("2", False)])
def test_the_builder_needs_a_thread(threads, rejected):
    argv = ["--num-dataset-builder-threads", threads]
    if rejected:
        assert [p.flags for p in problems(argv)] == [("--num-dataset-builder-threads",)]
    else:
        assert resolve(argv).num_dataset_builder_threads == int(threads)


def test_the_legacy_split_whole():
    resolved = resolve(["--data-path", "d"])
    assert provenance(resolved, "split") == (
        "969, 30, 1", "normalized", "--data-path given without --split", ("data_path",))
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings] == [
        ("--data-path is given without --split; using the legacy split '969, 30, 1'",
         ("--split", "--data-path"))]


def test_phase_transitions_are_parsed_and_sorted():
    assert provenance(resolve(["--phase-transition-iterations", "300, 100"]),
                      "phase_transition_iterations") == (
        [100, 300], "normalized", "parsed and sorted", ("phase_transition_iterations",))


def test_inter_document_masking_omits_the_dataloader_mask():
    resolved = resolve(["--dataloader-inter-document-masking"])
    assert provenance(resolved, "create_attention_mask_in_dataloader") == (
        False, "derived", "--dataloader-inter-document-masking",
        ("dataloader_inter_document_masking",))


@pytest.mark.parametrize("seq, expected", [
    ("128", {"mode": "distribution", "type": "lognormal", "min_seq_len": 64,
             "max_seq_len": 128, "mean_seq_len": 96, "lognormal_sigma": 1.1}),
    ("10", {"mode": "distribution", "type": "lognormal", "min_seq_len": 5,
            "max_seq_len": 10, "mean_seq_len": 6, "lognormal_sigma": 1.1}),
])
def test_sft_mock_data_draws_lognormal_lengths(seq, expected):
    resolved = resolve(["--sft", "--mock-data", "--seq-length", seq,
                        "--micro-batch-size", "2", "--max-position-embeddings", "128"],
                       base=False)
    value, source, reason, inputs = provenance(resolved, "sft_mock_dataset_config_json")
    assert (json.loads(value), source, reason, inputs) == (
        expected, "derived", "lognormal default for --sft --mock-data", ("seq_length",))


@pytest.mark.parametrize("argv, scheduler", [
    (["--use-varlen-dataset", *PACKED], "dp_balanced"),
    (["--use-varlen-dataset", "--dynamic-context-parallel", *PACKED], "default_dynamic_cp"),
])
def test_the_varlen_dataset_picks_a_packing_scheduler(argv, scheduler):
    resolved = resolve(argv)
    assert provenance(resolved, "sequence_packing_scheduler") == (
        scheduler, "derived", "--use-varlen-dataset",
        ("use_varlen_dataset", "dynamic_context_parallel"))
    assert provenance(resolved, "variable_seq_lengths") == (
        True, "derived", "", ("sequence_packing_scheduler",))


def test_sbhd_validation_packs_nothing():
    resolved = resolve(["--use-varlen-dataset", "--varlen-sbhd-validation", "--data-path", "d",
                        "--split", "1"])
    assert resolved.sequence_packing_scheduler is None
    assert resolved.variable_seq_lengths is False


@pytest.mark.parametrize("argv, expected", [
    (["--tokenizer-type", "GPT2BPETokenizer"],
     [("--tokenizer-type GPT2BPETokenizer will need --vocab-file and --merge-file when the "
       "tokenizer is built", ("--tokenizer-type", "--vocab-file", "--merge-file"))]),
    (["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v"],
     [("--tokenizer-type GPT2BPETokenizer will need --merge-file when the tokenizer is built",
       ("--tokenizer-type", "--merge-file"))]),
    (["--tokenizer-type", "NullTokenizer"],
     [("--tokenizer-type NullTokenizer will need --vocab-size when the tokenizer is built",
       ("--tokenizer-type", "--vocab-size"))]),
    (["--tokenizer-type", "NullTokenizer", "--vocab-size", "8"], []),
    (["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v", "--merge-file", "m"], []),
])
def test_tokenizer_inputs_whole(argv, expected):
    assert warned(argv) == expected


def test_the_sft_mock_lengths_are_whole_numbers():
    resolved = resolve(["--sft", "--mock-data", "--seq-length", "10", "--micro-batch-size", "2",
                        "--max-position-embeddings", "128"], base=False)
    assert '"min_seq_len": 5,' in resolved.sft_mock_dataset_config_json


# -- without the plugins owning the settings the rules read: Megatron's defaults ----------


class _ParallelSizesOnly:
    """The parallel plugin with no settings but the context-parallel size (no dynamic
    context parallelism), and no training plugin (no per-token loss)."""

    megaplug_plugin = PluginInfo(name="parallel", description="test stand-in")

    def __init__(self, context_parallel: bool) -> None:
        self.context_parallel = context_parallel

    @hookimpl
    def add_args(self, flags) -> None:
        if self.context_parallel:
            flags.add_argument("--context-parallel-size", type=int, default=1)


def alone(argv, context_parallel: bool = False) -> list[tuple]:
    from megaplug._kernel import Kernel
    from megaplug._plugins import PluginSet
    from megaplug.sources._selection import PluginSelection
    from megaplug.builtin import data

    kernel = Kernel(PluginSet(PluginSelection(autoload=False),
                              builtins=[data, _ParallelSizesOnly(context_parallel)]))
    try:
        kernel.resolve(["--seq-length", "130", *argv], environ={},
                       target=megaplug.TargetEnvironment(environ={}))
    except megaplug.ConfigError as error:
        return [(p.message, tuple(p.flags)) for p in error.problems]
    return []


def test_alone_packing_needs_the_per_token_loss_and_picks_dp_balanced():
    assert alone(["--use-varlen-dataset"]) == [
        ("sequence packing (--sequence-packing-scheduler dp_balanced) needs "
         "--calculate-per-token-loss",
         ("--sequence-packing-scheduler", "calculate_per_token_loss"))]


def test_alone_there_is_no_context_parallelism():
    assert alone([]) == []


def test_a_context_parallel_size_of_zero_is_no_context_parallelism():
    assert alone(["--context-parallel-size", "0"], context_parallel=True) == []


def test_phase_transitions_already_parsed_are_kept():
    from megaplug.megatron import parse_args, validate_args

    environ = {"RANK": "0", "WORLD_SIZE": "1"}
    args = parse_args(argv=["--num-layers", "2", "--hidden-size", "64",
                            "--num-attention-heads", "4", "--seq-length", "128",
                            "--max-position-embeddings", "128", "--micro-batch-size", "2",
                            "--train-iters", "10", "--lr", "1e-4"], environ=environ)
    args.phase_transition_iterations = [100, 300]
    validate_args(args, environ=environ, torch_types=False,
                  target=megaplug.TargetEnvironment(device_capability=(9, 0)))
    assert args.phase_transition_iterations == [100, 300]
