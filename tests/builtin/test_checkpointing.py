"""The checkpointing plugin: formats, save/load settings, async save and checks."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_ckpt_support import (  # noqa: E402
    BASE, FLAGS_JSONL, fact_mismatches, kernel, messages, problems, resolve, warnings_of,
)

SAVE = ["--save", "/ckpt", "--save-interval", "100"]


def run(*argv: str, **packages):
    return resolve([*BASE, *argv], **packages)


def errors(*argv: str, **packages) -> list[str]:
    return messages([*BASE, *argv], **packages)


# -- flags -----------------------------------------------------------------------------

@pytest.mark.skipif(not FLAGS_JSONL.exists(), reason="Megatron flag facts not available")
def test_every_checkpointing_flag_matches_megatrons_parser():
    assert fact_mismatches("checkpointing") == []


def test_the_checkpointing_plugin_declares_63_flags_and_computes_use_dist_ckpt():
    specs = kernel().table.plugin_specs("checkpointing")
    assert len([s for s in specs if s.kind == "flag"]) == 63
    assert [s.dest for s in specs if s.kind == "computed"] == ["use_dist_ckpt"]


def test_optimizer_and_rng_switches_default_to_none():
    resolved = run()
    assert [resolved[d] for d in ("no_save_optim", "no_save_rng",
                                  "no_load_optim", "no_load_rng")] == [None] * 4
    assert run("--no-load-rng").no_load_rng is True


def test_save_interval_has_a_second_spelling():
    assert run("--save", "/c", "--persistent-save-interval", "50").save_interval == 50


# -- use_dist_ckpt -----------------------------------------------------------------------

@pytest.mark.parametrize("fmt, distributed", [
    ("torch", False), ("torch_dist", True), ("fsdp_dtensor", True)])
def test_every_format_but_torch_is_distributed(fmt, distributed):
    resolved = run("--ckpt-format", fmt)
    assert resolved.use_dist_ckpt is distributed
    assert resolved.source("use_dist_ckpt").inputs == ("ckpt_format",)


def test_the_deprecated_flags_warn_and_change_nothing():
    resolved = run("--use-dist-ckpt", "--dist-ckpt-format", "zarr", "--ckpt-fully-parallel-save",
                   "--ckpt-format", "torch")
    assert resolved.use_dist_ckpt is False
    assert resolved.dist_ckpt_format_deprecated == "zarr"
    assert warnings_of(resolved) == [
        "--ckpt-fully-parallel-save is deprecated and has no effect",
        "--use-dist-ckpt is deprecated and has no effect",
        "--dist-ckpt-format is deprecated and has no effect",
    ]


# -- async save --------------------------------------------------------------------------

def test_async_save_needs_the_persistent_worker():
    resolved = run("--async-save")
    assert resolved.async_save is False
    assert resolved.async_strategy == "mcore"
    assert ("--async-save needs --use-persistent-ckpt-worker; saving synchronously"
            in warnings_of(resolved))


def test_async_save_with_the_persistent_worker_keeps_nvrx():
    resolved = run("--async-save", "--use-persistent-ckpt-worker")
    assert resolved.async_save is True and resolved.async_strategy == "nvrx"
    assert run("--async-save", "--use-persistent-ckpt-worker",
               "--async-strategy", "mcore").async_strategy == "mcore"


def test_synchronous_runs_report_the_mcore_strategy():
    assert run().async_strategy == "mcore"


def test_legacy_torch_format_keeps_async_save_as_given():
    assert run("--async-save", "--ckpt-format", "torch").async_save is True


# -- saving --------------------------------------------------------------------------------

def test_save_needs_a_positive_interval():
    assert errors("--save", "/ckpt") == ["--save needs a positive --save-interval (it is missing)"]
    assert errors("--save", "/ckpt", "--save-interval", "0") == [
        "--save needs a positive --save-interval (it is 0)"]
    assert run(*SAVE).save_interval == 100


def test_retention_is_a_multiple_of_the_save_interval():
    found = problems([*BASE, *SAVE, "--save-retain-interval", "250"])
    assert [p.message for p in found] == [
        "--save-retain-interval 250 must be a positive multiple of --save-interval 100"]
    assert found[0].hint == "use e.g. --save-retain-interval 200"
    assert run(*SAVE, "--save-retain-interval", "500").save_retain_interval == 500


def test_parameter_dumps_exclude_overlapped_param_gather():
    assert errors("--save-params-interval", "10", "--overlap-param-gather") == [
        "--save-params-interval cannot be used with --overlap-param-gather"]


# -- loading -----------------------------------------------------------------------------

def test_main_params_from_checkpoint_need_no_load_optim():
    assert errors("--load-main-params-from-ckpt") == [
        "--load-main-params-from-ckpt must be used with --no-load-optim"]
    run("--load-main-params-from-ckpt", "--no-load-optim")


def test_skip_train_turns_on_no_load_optim_after_the_main_params_check():
    resolved = run("--skip-train")
    assert resolved.no_load_optim is True
    assert "--skip-train turns on --no-load-optim" in warnings_of(resolved)
    assert errors("--skip-train", "--load-main-params-from-ckpt") == [
        "--load-main-params-from-ckpt must be used with --no-load-optim"]


def test_checkpoint_args_need_a_checkpoint():
    assert errors("--use-checkpoint-args") == [
        "--use-checkpoint-args needs --load or --pretrained-checkpoint"]
    run("--use-checkpoint-args", "--pretrained-checkpoint", "/pre")


def test_override_iteration_excludes_finetune():
    assert errors("--override-ckpt-iteration", "5", "--finetune") == [
        "--override-ckpt-iteration cannot be used with --finetune"]
    assert run("--override-ckpt-iteration", "5").override_ckpt_iteration == 5


# -- conversion ---------------------------------------------------------------------------

def test_conversion_needs_a_source_and_a_target():
    assert errors("--ckpt-convert-format", "torch_dist") == [
        "--ckpt-convert-format needs --ckpt-convert-save",
        "--ckpt-convert-format needs --load",
    ]


def test_conversion_exits_when_the_checkpoint_is_missing():
    resolved = run("--ckpt-convert-format", "torch", "--ckpt-convert-save", "/out", "--load", "/in")
    assert resolved.exit_on_missing_checkpoint is True
    assert run().exit_on_missing_checkpoint is False


# -- non-persistent checkpoints and replication ---------------------------------------------

def test_in_memory_non_persistent_checkpoints_are_not_supported():
    assert errors("--non-persistent-ckpt-type", "in_memory") == [
        "--non-persistent-ckpt-type in_memory is not supported yet"]


def test_local_checkpoints_need_nvidia_resiliency_ext_and_a_directory():
    assert errors("--non-persistent-ckpt-type", "local") == [
        "--non-persistent-ckpt-type local requires nvidia_resiliency_ext, not installed",
        "--non-persistent-ckpt-type local needs --non-persistent-local-ckpt-dir",
    ]
    resolved = run("--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/l",
                   nvidia_resiliency_ext="0.4.1")
    assert resolved.non_persistent_ckpt_type == "local"


def test_local_checkpoints_exclude_checkpoint_args():
    found = errors("--non-persistent-ckpt-type", "local", "--non-persistent-local-ckpt-dir", "/l",
                   "--use-checkpoint-args", "--load", "/c", nvidia_resiliency_ext="0.4.1")
    assert found == ["--use-checkpoint-args cannot be used with --non-persistent-ckpt-type local"]


def test_replication_needs_a_jump_and_local_checkpoints():
    assert errors("--replication") == [
        "--replication needs --replication-jump",
        "--replication needs --non-persistent-ckpt-type local (got None)",
    ]
    resolved = run("--replication", "--replication-jump", "2",
                   "--non-persistent-ckpt-type", "local",
                   "--non-persistent-local-ckpt-dir", "/l", nvidia_resiliency_ext="0.4.1")
    assert resolved.replication_jump == 2


def test_a_jump_without_replication_is_dropped():
    resolved = run("--replication-jump", "4")
    assert resolved.replication_jump is None
    assert "--replication-jump is ignored without --replication" in warnings_of(resolved)


# -- formats and parallel save/load ---------------------------------------------------------

def test_torch_dcp_needs_no_model_parallelism():
    assert errors("--ckpt-format", "torch_dcp", "--tensor-model-parallel-size", "2") == [
        "--ckpt-format torch_dcp is not supported with --tensor-model-parallel-size 2",
    ]
    assert run("--ckpt-format", "torch_dcp").use_dist_ckpt is True


def test_emerging_optimizers_save_in_torch_or_torch_dist():
    assert errors("--optimizer", "muon", "--ckpt-format", "fsdp_dtensor") == [
        "--optimizer muon cannot save in --ckpt-format fsdp_dtensor"]
    run("--optimizer", "muon")


def test_the_pg_tensor_cache_needs_one_process_group():
    found = errors("--ckpt-pg-tensors-cache-path", "/cache",
                   "--ckpt-fully-parallel-load-process-group", "ep_dp")
    assert found == ["--ckpt-pg-tensors-cache-path needs the same save and load process group, got "
                     "--ckpt-fully-parallel-save-process-group dp and "
                     "--ckpt-fully-parallel-load-process-group ep_dp"]


def test_without_gloo_the_distributed_optimizer_needs_a_distributed_format():
    argv = ("--disable-gloo-process-groups", "--use-distributed-optimizer")
    assert errors(*argv, "--ckpt-format", "torch") == [
        "--disable-gloo-process-groups with the distributed optimizer needs a distributed "
        "checkpoint format, not --ckpt-format torch"]
    run(*argv)
    assert errors("--disable-gloo-process-groups", "--dist-ckpt-optim-fully-reshardable",
                  "--distrib-optim-fully-reshardable-mem-efficient") == [
        "--distrib-optim-fully-reshardable-mem-efficient needs Gloo process groups"]


def test_risky_parallel_save_and_load_settings_warn():
    resolved = run("--no-ckpt-fully-parallel-save", "--use-distributed-optimizer",
                   "--ckpt-fully-parallel-load", "--ckpt-fully-parallel-load-exchange-algo",
                   "gather_rounds")
    assert warnings_of(resolved) == [
        "with --no-ckpt-fully-parallel-save and the distributed optimizer, training cannot "
        "resume with a different parallelism",
        "only the broadcast exchange algorithm is numerically reliable for fully parallel loads",
    ]


def test_invalid_choices_are_rejected_at_parse_time():
    found = problems([*BASE, "--ckpt-format", "NONE"])
    assert found[0].plugin == "checkpointing"
    assert found[0].message == "--ckpt-format: invalid choice 'NONE'"
