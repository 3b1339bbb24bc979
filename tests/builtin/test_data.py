"""The data plugin: data sources, split, sequence lengths, packing, FIM and tokenizer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dlr_support import messages, problems, resolve, warnings_of  # noqa: E402


# -- data paths and split ------------------------------------------------------------

def test_data_path_without_split_uses_the_legacy_split_and_warns():
    resolved = resolve(["--data-path", "a", "b"])
    assert resolved.split == "969, 30, 1"
    assert resolved.data_path == ["a", "b"]
    assert resolved.source("split").source == "normalized"
    assert any("legacy split '969, 30, 1'" in w for w in warnings_of(resolved))


def test_an_explicit_split_is_kept_and_no_data_path_means_no_split():
    assert resolve(["--data-path", "a", "--split", "90,5,5"]).split == "90,5,5"
    assert resolve([]).split is None


def test_data_path_and_data_args_path_exclude_each_other():
    found = problems(["--data-path", "a", "--data-args-path", "paths.txt"])
    assert [p.message for p in found] == [
        "--data-path and --data-args-path cannot be used together"]
    assert found[0].plugin == "data" and found[0].flags == ("--data-path", "--data-args-path")


def test_per_split_paths_and_their_args_file_exclude_each_other():
    found = messages(["--train-data-path", "t", "--valid-data-path", "v",
                      "--per-split-data-args-path", "splits.json"])
    assert found == ["[data] --train-data-path, --valid-data-path cannot be used together with "
                     "--per-split-data-args-path (hint: give the per-split paths either on the "
                     "command line or in the file)"]


def test_only_one_data_source():
    found = messages(["--mock-data", "--data-path", "a"])
    assert any("only one data source may be given, got --mock-data and --data-path" in m
               for m in found)
    assert resolve(["--mock-data"]).mock_data is True
    assert resolve(["--train-data-path", "t", "--valid-data-path", "v"]).train_data_path == ["t"]


def test_phase_transition_iterations_are_parsed_and_sorted():
    assert (resolve(["--phase-transition-iterations", "300, 100,200"]).phase_transition_iterations
            == [100, 200, 300])
    assert resolve([]).phase_transition_iterations is None


def test_bad_phase_transition_iterations_are_reported():
    found = messages(["--phase-transition-iterations", "100,later"])
    assert any("--phase-transition-iterations '100,later' is not a comma-separated list" in m
               for m in found)


def test_dataset_builder_needs_a_thread():
    found = messages(["--num-dataset-builder-threads", "0"])
    assert any("--num-dataset-builder-threads must be at least 1, got 0" in m for m in found)


def test_type_errors_are_rejected():
    assert any("--num-workers: invalid int value 'many'" in m
               for m in messages(["--num-workers", "many"]))
    assert any("--tokenizer-type: invalid choice" in m
               for m in messages(["--tokenizer-type", "Bytes"]))


# -- sequence lengths ------------------------------------------------------------------

def test_encoder_seq_length_fills_seq_length_and_back():
    from_encoder = resolve(["--encoder-seq-length", "64", "--micro-batch-size", "2",
                            "--max-position-embeddings", "64"], base=False)
    assert (from_encoder.seq_length, from_encoder.encoder_seq_length) == (64, 64)
    from_seq = resolve([])
    assert (from_seq.seq_length, from_seq.encoder_seq_length) == (128, 128)


def test_seq_length_and_encoder_seq_length_exclude_each_other_and_one_is_needed():
    assert any("--seq-length and --encoder-seq-length cannot both be given" in m
               for m in messages(["--encoder-seq-length", "128"]))
    assert any("the sequence length is not set" in m
               for m in messages(["--micro-batch-size", "2"], base=False))


def test_context_parallelism_needs_a_multiple_of_twice_its_size():
    found = messages(["--context-parallel-size", "4", "--seq-length", "100"],
                     environ={"WORLD_SIZE": "4"})
    assert any("--seq-length 100 is not a multiple of 2 x the context-parallel size 4" in m
               for m in found)
    assert resolve(["--context-parallel-size", "4"], environ={"WORLD_SIZE": "4"}).seq_length == 128


def test_a_length_given_only_as_encoder_seq_length_skips_the_context_parallel_check():
    # Megatron checks the multiple before it copies --encoder-seq-length over.
    resolved = resolve(["--encoder-seq-length", "100", "--micro-batch-size", "2",
                        "--max-position-embeddings", "128", "--context-parallel-size", "4"],
                       environ={"WORLD_SIZE": "4"}, base=False)
    assert resolved.seq_length == 100


# -- attention masks, SFT, varlen and packing --------------------------------------------

def test_inter_document_masking_turns_off_dataloader_masks():
    assert resolve([]).create_attention_mask_in_dataloader is True
    resolved = resolve(["--dataloader-inter-document-masking"])
    assert resolved.create_attention_mask_in_dataloader is False
    assert resolved.source("create_attention_mask_in_dataloader").plugin == "data"


def test_sft_mock_data_gets_a_lognormal_length_distribution():
    resolved = resolve(["--sft", "--mock-data"])
    assert json.loads(resolved.sft_mock_dataset_config_json) == {
        "mode": "distribution", "type": "lognormal", "min_seq_len": 64, "max_seq_len": 128,
        "mean_seq_len": 96, "lognormal_sigma": 1.1}
    assert resolve(["--sft"]).sft_mock_dataset_config_json is None
    given = resolve(["--sft", "--mock-data", "--sft-mock-dataset-config-json", "{}"])
    assert given.sft_mock_dataset_config_json == "{}"


def test_without_packing_sequence_lengths_are_fixed():
    resolved = resolve([])
    assert resolved.variable_seq_lengths is False
    assert resolved.sequence_packing_scheduler is None


def test_varlen_dataset_picks_dp_balanced_packing_and_variable_lengths():
    resolved = resolve(["--use-varlen-dataset", "--calculate-per-token-loss"])
    assert resolved.sequence_packing_scheduler == "dp_balanced"
    assert resolved.variable_seq_lengths is True


def test_varlen_dataset_with_dynamic_context_parallelism_uses_its_scheduler():
    resolved = resolve(["--use-varlen-dataset", "--calculate-per-token-loss",
                        "--dynamic-context-parallel"])
    assert resolved.sequence_packing_scheduler == "default_dynamic_cp"
    assert resolved.variable_seq_lengths is True


def test_packing_needs_per_token_loss():
    found = messages(["--use-varlen-dataset"])
    assert any("sequence packing (--sequence-packing-scheduler dp_balanced) needs "
               "--calculate-per-token-loss" in m for m in found)


def test_varlen_dataset_and_sft_exclude_each_other():
    found = messages(["--use-varlen-dataset", "--sft", "--calculate-per-token-loss"])
    assert any("--use-varlen-dataset and --sft cannot be used together" in m for m in found)


def test_sbhd_validation_needs_no_scheduler_and_real_data():
    assert resolve(["--use-varlen-dataset", "--varlen-sbhd-validation"]
                   ).sequence_packing_scheduler is None
    found = messages(["--use-varlen-dataset", "--varlen-sbhd-validation", "--mock-data",
                      "--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss"])
    assert any("--varlen-sbhd-validation does not pack sequences" in m for m in found)
    assert any("--varlen-sbhd-validation needs a real dataset, not --mock-data" in m for m in found)


def test_dynamic_cp_scheduler_needs_dynamic_context_parallelism():
    found = messages(["--sequence-packing-scheduler", "default_dynamic_cp",
                      "--calculate-per-token-loss"])
    assert any("--sequence-packing-scheduler default_dynamic_cp needs --dynamic-context-parallel"
               in m for m in found)


def test_scheduler_cuda_graphs_need_single_varlen_samples():
    found = messages(["--sequence-packing-scheduler", "dp_balanced", "--calculate-per-token-loss",
                      "--cuda-graph-impl", "transformer_engine"])
    assert any("need --use-varlen-dataset and --micro-batch-size 1 (got micro batch 2)" in m
               for m in found)
    resolved = resolve(["--use-varlen-dataset", "--calculate-per-token-loss",
                        "--cuda-graph-impl", "transformer_engine", "--micro-batch-size", "1"])
    assert resolved.variable_seq_lengths is True


# -- FIM ---------------------------------------------------------------------------------

def test_fim_defaults_are_accepted():
    resolved = resolve(["--fim-data", "--data-path", "a", "--split", "1,0,0"])
    assert (resolved.fim_prefix_token, resolved.fim_eod_token) == ("<fim_prefix>", "<|endoftext|>")


def test_fim_needs_real_data_and_non_zero_rates():
    found = messages(["--fim-data", "--mock-data", "--fim-rate", "0"])
    assert any("--fim-data has no mock dataset" in m for m in found)
    assert any("--fim-data needs a non-zero --fim-rate, got 0.0" in m for m in found)


# -- tokenizer ---------------------------------------------------------------------------

def test_caller_default_tokenizer_applies_only_when_none_is_given():
    defaults = {"tokenizer_type": "GPT2BPETokenizer"}
    assert resolve([], defaults=defaults).tokenizer_type == "GPT2BPETokenizer"
    given = resolve(["--tokenizer-type", "NullTokenizer", "--vocab-size", "128"],
                    defaults=defaults)
    assert given.tokenizer_type == "NullTokenizer"


def test_tokenizer_inputs_it_will_need_are_named_early():
    resolved = resolve(["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v.json"])
    assert any("--tokenizer-type GPT2BPETokenizer will need --merge-file" in w
               for w in warnings_of(resolved))
    quiet = resolve(["--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "v.json",
                     "--merge-file", "m.txt"])
    assert not any("will need" in w for w in warnings_of(quiet))


def test_tokenizer_spellings_and_destinations():
    resolved = resolve(["--tokenizer-metadata", "meta.json", "--tokenizer-special-tokens", "<a>",
                        "<b>", "--disable-pad-vocab-size", "--tiktoken-pattern", "v2"])
    assert resolved.metadata_path == "meta.json"
    assert resolved.special_tokens == ["<a>", "<b>"]
    assert resolved.pad_vocab_size is False and resolved.tiktoken_pattern == "v2"


@pytest.mark.parametrize("flag", ["--sft-loss-log-mode", "--sequence-packing-scheduler"])
def test_seed_only_choices_are_enforced(flag):
    assert any(f"{flag}: invalid choice" in m for m in messages([flag, "sometimes"]))
