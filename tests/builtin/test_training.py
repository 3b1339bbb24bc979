"""The training plugin: its flags, batch sizes and training-length schedules."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import megaplug

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _training_stub import kernel, messages, problems, resolve, warnings  # noqa: E402

FLAGS_JSONL = Path(__file__).resolve().parents[3] / "shared" / "megatron" / "flags.jsonl"

_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false"}


def _training_specs() -> dict[str, object]:
    return {o: s for s in kernel().table.plugin_specs("training") for o in s.option_strings}


# -- declared flags --------------------------------------------------------------------


@pytest.mark.skipif(not FLAGS_JSONL.exists(), reason="Megatron flag facts not available")
def test_flags_match_megatron_facts():
    specs = _training_specs()
    rows = [json.loads(line) for line in FLAGS_JSONL.read_text().splitlines()]
    checked = 0
    for row in rows:
        spec = specs.get(row["option_strings"][0])
        if spec is None:
            continue
        checked += 1
        assert spec.option_strings == tuple(row["option_strings"])
        assert spec.dest == row["dest"]
        assert spec.action == _ACTIONS[row["action"]]
        assert spec.hidden == row["help_suppressed"], spec.dest
        default = spec.default if not isinstance(spec.default, list) else list(spec.default)
        assert default == row["default"], spec.dest
        if row["type"] in ("int", "float", "str"):
            assert spec.type_name == row["type"], spec.dest
        assert (list(spec.choices) if spec.choices else None) == row["choices"], spec.dest
        if row["action"] == "_StoreAction":
            assert spec.nargs == row["nargs"], spec.dest
    assert checked == 144


def test_seed_only_muon_flags():
    resolved = resolve("--muon-no-concurrent-groups", "--muon-ns-batch-size", "32",
                       "--rmsnorm-weight-decay-mult", "0.5")
    assert resolved.muon_concurrent_groups is False
    assert resolved.muon_ns_batch_size == 32
    assert resolved.rmsnorm_weight_decay_mult == 0.5
    defaults = resolve()
    assert (defaults.muon_concurrent_groups, defaults.muon_ns_batch_size,
            defaults.rmsnorm_weight_decay_mult) == (True, 1, None)


def test_exit_signal_by_member_name_only():
    assert resolve().exit_signal == 15
    assert resolve("--exit-signal", "SIGUSR1").exit_signal == 10
    # Megatron looks the text up as a signal.Signals member name: numbers are refused
    for text in ("SIGNOPE", "2", "30", "sigterm", "TERM", "Signals.SIGTERM"):
        assert any("--exit-signal" in p.message for p in problems("--exit-signal", text))


def test_counters_start_at_zero():
    resolved = resolve()
    assert (resolved.consumed_train_samples, resolved.skipped_train_samples,
            resolved.consumed_valid_samples) == (0, 0, 0)


# -- batch sizes -----------------------------------------------------------------------


def test_global_batch_defaults_to_micro_times_data_parallel():
    resolved = resolve("--tensor-model-parallel-size", "2")
    assert resolved.data_parallel_size == 4
    assert resolved.global_batch_size == 8
    assert "derived by training" in resolved.source("global_batch_size").describe()


def test_explicit_global_batch_is_kept():
    assert resolve("--global-batch-size", "64").global_batch_size == 64


def test_micro_batch_size_is_required():
    text = messages("--train-iters", "10", base=False)
    assert "--micro-batch-size is required" in text


def test_micro_batch_size_must_be_positive():
    assert "--micro-batch-size 0 must be positive" in messages("--micro-batch-size", "0")


def test_global_batch_size_must_be_positive():
    assert "--global-batch-size 0 must be positive" in messages("--global-batch-size", "0")


def test_a_derived_global_batch_must_be_positive_too():
    # a negative WORLD_SIZE gives negative data-parallel ranks, as in Megatron's arithmetic
    text = messages(env={"WORLD_SIZE": "-8", "RANK": "0"})
    assert ("the global batch size defaults to micro batch size x data-parallel size = -16, "
            "which is not positive") in text


def test_eval_batches_use_pythons_modulo_with_negative_data_parallel_ranks():
    # 32 % (2 * -8) == 0 passes, 40 % (2 * -8) == -8 does not, as Megatron computes them
    assert resolve("--global-batch-size", "32", env={"WORLD_SIZE": "-8"}).global_batch_size == 32
    assert "--global-batch-size 40 must be divisible" in messages(
        "--global-batch-size", "40", env={"WORLD_SIZE": "-8"})


def test_eval_batch_sizes_default_to_training_ones():
    resolved = resolve("--global-batch-size", "32")
    assert (resolved.eval_global_batch_size, resolved.eval_micro_batch_size) == (32, 2)


def test_eval_global_batch_must_split_over_data_parallel_ranks():
    found = problems("--global-batch-size", "32", "--eval-micro-batch-size", "8")
    assert [p.message for p in found] == [
        "--global-batch-size 32 must be divisible by --eval-micro-batch-size 8 x batch-parallel "
        "size 8 = 64 (evaluation batch sizes default to the training ones)"]
    assert found[0].flags == ("--global-batch-size", "--eval-micro-batch-size",
                              "data_parallel_size")
    assert "--eval-micro-batch-size 4" in found[0].hint


def test_default_eval_sizes_check_the_training_global_batch():
    text = messages("--micro-batch-size", "4", "--global-batch-size", "16")
    assert "--global-batch-size 16 must be divisible by --micro-batch-size 4" in text


def test_batch_parallel_ranks_are_the_world_over_one_model_parallel_group():
    # a feature that groups data-parallel ranks (GTP) shrinks data_parallel_size, not this
    resolved = resolve("--tensor-model-parallel-size", "2")
    assert resolved.global_batch_size == 8  # micro batch 2 x (8 ranks / TP 2)
    assert "--eval-micro-batch-size 4 x batch-parallel size 4 = 16" in messages(
        "--tensor-model-parallel-size", "2", "--global-batch-size", "24",
        "--eval-micro-batch-size", "4")


def test_step_schedule_excludes_global_batch_size():
    text = messages("--step-batch-size-schedule", "0:16 1000:32", "--global-batch-size", "16")
    assert "--step-batch-size-schedule and --global-batch-size cannot be used together" in text


def test_step_schedule_keeps_the_default_global_batch():
    resolved = resolve("--step-batch-size-schedule", "0:16 1000:32", "--train-iters", "10")
    assert resolved.global_batch_size == 16


def test_caller_default_global_batch_is_not_explicit():
    resolved = kernel().resolve(["--micro-batch-size", "2", "--train-iters", "10",
                                 "--step-batch-size-schedule", "0:16"],
                                environ={"WORLD_SIZE": "8"}, defaults={"global_batch_size": 16})
    assert resolved.global_batch_size == 16


def test_retired_batch_size_flag():
    found = problems("--batch-size", "4")
    assert found[0].message == "--batch-size 4 is no longer supported"
    assert found[0].hint == "use --micro-batch-size 4"


def test_weight_decay_cond_type_becomes_qk_layernorm_switch():
    resolved = resolve("--no-weight-decay-cond-type", "apply_wd_to_qk_layernorm")
    assert resolved.apply_wd_to_qk_layernorm is True
    assert resolved.no_weight_decay_cond_type is None
    assert "--no-weight-decay-cond-type is deprecated" in warnings(resolved)
    plain = resolve()
    assert plain.apply_wd_to_qk_layernorm is False and plain.no_weight_decay_cond_type is None


def test_retired_keys_leave_the_result():
    resolved = resolve()
    for key in ("batch_size", "warmup", "checkpoint_activations", "recompute_activations",
                "cuda_graph_scope_deprecated"):
        assert key not in resolved


# -- iterations, samples and schedules ---------------------------------------------------


def test_iteration_based_training_rejects_sample_settings():
    text = messages("--lr-decay-samples", "100", "--lr-warmup-samples", "10")
    assert "--train-iters sets iteration-based training" in text
    assert "--lr-decay-samples, --lr-warmup-samples" in text


def test_iteration_based_training_accepts_a_batch_size_rampup():
    assert resolve("--rampup-batch-size", "4", "4", "100").rampup_batch_size == [4, 4, 100]


def test_train_iters_and_samples_exclude_each_other():
    found = problems("--train-samples", "1000")
    # one mistake, one message: not a mirror image from the sample-based check
    assert [p.message for p in found] == [
        "--train-iters sets iteration-based training, which cannot be combined with "
        "--train-samples"]


def test_sample_based_training():
    resolved = resolve("--micro-batch-size", "2", "--train-samples", "1000",
                       "--lr-decay-samples", "900", "--lr-warmup-samples", "10",
                       "--rampup-batch-size", "4", "4", "100", base=False)
    assert resolved.train_iters is None
    assert resolved.rampup_batch_size == [4, 4, 100]


def test_sample_based_training_rejects_iteration_settings():
    text = messages("--micro-batch-size", "2", "--train-samples", "1000",
                    "--lr-decay-iters", "5", "--lr-warmup-iters", "2", base=False)
    assert "--lr-decay-iters, --lr-warmup-iters" in text


def test_warmup_fraction_excludes_warmup_iters():
    text = messages("--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "3")
    assert "--lr-warmup-fraction and --lr-warmup-iters both set the warmup length" in text


def test_warmup_fraction_excludes_warmup_samples():
    text = messages("--micro-batch-size", "2", "--train-samples", "100",
                    "--lr-warmup-fraction", "0.1", "--lr-warmup-samples", "3", base=False)
    assert "--lr-warmup-fraction and --lr-warmup-samples both set the warmup length" in text


def test_warmup_fraction_alone_is_fine():
    assert resolve("--lr-warmup-fraction", "0.01").lr_warmup_fraction == 0.01


def test_retired_warmup_flag():
    found = problems("--warmup", "100")
    assert found[0].message == "--warmup 100 is no longer supported"


def test_min_lr_above_lr():
    assert "--min-lr 0.001 is above --lr 0.0001" in messages("--min-lr", "1e-3")


def test_nan_lr_is_refused_where_it_is_given():
    assert messages("--lr", "nan") == "--lr: 'nan' is not a finite number"


def test_nan_lr_set_after_parsing_fails_the_floor_check():
    """A caller may still put one on Megatron's namespace before validate_args."""
    from _training_stub import BASE, ENV, target

    loaded = kernel()
    draft, sink = loaded.parse(BASE, environ=ENV, target=target())
    draft.settle({"lr": float("nan")}, {})  # as a caller may, outside any rule
    with pytest.raises(megaplug.ConfigError) as info:
        loaded.finish(draft, sink)
    assert "--min-lr 0.0 cannot be compared with --lr nan" in [
        p.message for p in info.value.problems]


def test_constant_weight_decay_fills_start_and_end():
    resolved = resolve("--weight-decay", "0.1")
    assert (resolved.start_weight_decay, resolved.end_weight_decay) == (0.1, 0.1)


def test_constant_weight_decay_rejects_start_and_end():
    text = messages("--start-weight-decay", "0.1")
    assert "--start-weight-decay needs a varying weight-decay schedule" in text


def test_varying_weight_decay_needs_start_and_end():
    text = messages("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.0")
    assert "--weight-decay-incr-style linear needs --end-weight-decay" in text
    resolved = resolve("--weight-decay-incr-style", "cosine", "--start-weight-decay", "0.0",
                       "--end-weight-decay", "0.1")
    assert (resolved.start_weight_decay, resolved.end_weight_decay) == (0.0, 0.1)


def test_override_and_checkpoint_scheduler_warns():
    resolved = resolve("--override-opt-param-scheduler", "--use-checkpoint-opt_param-scheduler")
    assert "are both set" in warnings(resolved)


def test_eval_micro_batch_size_zero_is_rejected():
    # Megatron divides by eval_micro_batch_size * data-parallel size: zero cannot work
    text = messages("--global-batch-size", "32", "--eval-micro-batch-size", "0")
    assert "--eval-micro-batch-size is 0" in text


def test_eval_sizes_use_python_modulo_like_megatron():
    # 32 % (-2 * 8) == 0 passes Megatron's assert; 32 % (-3 * 8) == -16 does not
    assert resolve("--global-batch-size", "32", "--eval-micro-batch-size", "-2") \
        .eval_micro_batch_size == -2
    assert "must be divisible by --eval-micro-batch-size -3" in messages(
        "--global-batch-size", "32", "--eval-micro-batch-size", "-3")


def test_eval_global_batch_size_zero_is_not_replaced_by_the_training_one():
    # 0 is divisible by anything; the training global batch (24, not a multiple of 16) is
    # not what Megatron checks when an evaluation global batch is given
    resolved = resolve("--global-batch-size", "24", "--eval-global-batch-size", "0",
                       "--micro-batch-size", "2")
    assert resolved.eval_global_batch_size == 0
