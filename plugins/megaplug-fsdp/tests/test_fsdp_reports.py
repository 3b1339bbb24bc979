"""What each FSDP rule reports, whole: the message, every flag it names and the hint; and
for each derivation, the value, why and from what.

Through ``megaplug.resolve`` with every installed plugin. A problem is found by the flags it
names, not by the plugin or module that holds the rule.
"""

from __future__ import annotations

from typing import Optional

import pytest

import megaplug
from megaplug.testing import resolve

FSDP2 = ("--use-torch-fsdp2", "--untie-embeddings-and-output-weights",
         "--no-gradient-accumulation-fusion")
MEGATRON_FSDP = ("--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor")


def outcome(*argv: str, packages: Optional[dict] = None, capability=(9, 0),
            environ: Optional[dict] = None):
    installed = {"transformer_engine": "2.17.1", "torch": "2.13.0", **(packages or {})}
    target = megaplug.TargetEnvironment(packages=installed, device_capability=capability)
    try:
        return resolve(*argv, environ=environ or {}, target=target), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


def reported(found: list, *flags: str) -> list[tuple]:
    """(message, flags, hint) of each problem naming all of ``flags``."""
    return [(p.message, tuple(p.flags), p.hint) for p in found if set(flags) <= set(p.flags)]


def warned(resolved: megaplug.Resolved, *flags: str) -> list[tuple]:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings if set(flags) <= set(w.flags)]


def provenance(resolved: megaplug.Resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


@pytest.mark.parametrize("argv, packages, expected", [
    (FSDP2, {"torch": "2.3.0"},
     ("--use-torch-fsdp2 requires torch >= 2.4.0, found 2.3.0", ("--use-torch-fsdp2",),
      "upgrade torch to 2.4.0 or later, or use --use-megatron-fsdp")),
    (FSDP2 + ("--pipeline-model-parallel-size", "2", "--num-layers", "2"), None,
     ("--use-torch-fsdp2 is not supported with pipeline parallelism "
      "(--pipeline-model-parallel-size 2)",
      ("--use-torch-fsdp2", "--pipeline-model-parallel-size"),
      "set --pipeline-model-parallel-size 1, or use --use-megatron-fsdp")),
    (FSDP2 + ("--expert-model-parallel-size", "2", "--num-experts", "2"), None,
     ("--use-torch-fsdp2 is not supported with expert parallelism "
      "(--expert-model-parallel-size 2)",
      ("--use-torch-fsdp2", "--expert-model-parallel-size"),
      "set --expert-model-parallel-size 1, or use --use-megatron-fsdp")),
    (("--use-torch-fsdp2", "--untie-embeddings-and-output-weights"), None,
     ("--use-torch-fsdp2 does not support gradient accumulation fusion",
      ("--use-torch-fsdp2", "--no-gradient-accumulation-fusion"),
      "add --no-gradient-accumulation-fusion")),
    (FSDP2 + ("--ckpt-format", "torch"), None,
     ("--use-torch-fsdp2 cannot save --ckpt-format torch", ("--use-torch-fsdp2", "--ckpt-format"),
      "use --ckpt-format torch_dist or --ckpt-format torch_dcp")),
    (("--use-torch-fsdp2", "--no-gradient-accumulation-fusion"), None,
     ("--use-torch-fsdp2 needs separate input embedding and output weights",
      ("--use-torch-fsdp2", "--untie-embeddings-and-output-weights"),
      "add --untie-embeddings-and-output-weights")),
    (FSDP2 + ("--fp16",), None,
     ("--use-torch-fsdp2 does not support --fp16 yet", ("--use-torch-fsdp2", "--fp16"),
      "train with --bf16 instead")),
    (("--use-megatron-fsdp",), None,
     ("--use-megatron-fsdp saves checkpoints only as --ckpt-format fsdp_dtensor, not torch_dist",
      ("--use-megatron-fsdp", "--ckpt-format"), "add --ckpt-format fsdp_dtensor")),
    (MEGATRON_FSDP + ("--megatron-fsdp-version", "2", "--use-distributed-optimizer"), None,
     ("--megatron-fsdp-version 2 cannot be combined with --use-distributed-optimizer",
      ("--megatron-fsdp-version", "--use-distributed-optimizer"),
      "drop --use-distributed-optimizer; Megatron-FSDP v2 shards the optimizer state itself")),
    (MEGATRON_FSDP + ("--moe-single-grouped-weight", "--num-experts", "2"), None,
     ("--use-megatron-fsdp does not support --moe-single-grouped-weight yet",
      ("--use-megatron-fsdp", "--moe-single-grouped-weight"),
      "drop --moe-single-grouped-weight, or use the distributed optimizer without "
      "Megatron-FSDP")),
    (MEGATRON_FSDP + ("--moe-single-grouped-bias", "--num-experts", "2"), None,
     ("--use-megatron-fsdp does not support --moe-single-grouped-bias yet",
      ("--use-megatron-fsdp", "--moe-single-grouped-bias"),
      "drop --moe-single-grouped-bias, or use the distributed optimizer without "
      "Megatron-FSDP")),
    (MEGATRON_FSDP + ("--check-weight-hash-across-dp-replicas-interval", "10",
                      "--data-parallel-sharding-strategy", "optim_grads_params"), None,
     ("--check-weight-hash-across-dp-replicas-interval cannot be used when parameters are "
      "sharded (optim_grads_params)",
      ("--check-weight-hash-across-dp-replicas-interval", "--data-parallel-sharding-strategy"),
      "drop --check-weight-hash-across-dp-replicas-interval, or choose a sharding strategy that "
      "keeps parameters replicated")),
    (MEGATRON_FSDP + ("--init-model-with-meta-device", "--data-parallel-sharding-strategy",
                      "no_shard"), None,
     ("--init-model-with-meta-device is neither supported nor needed with the no_shard "
      "sharding strategy",
      ("--init-model-with-meta-device", "--data-parallel-sharding-strategy"),
      "drop --init-model-with-meta-device, or shard with optim, optim_grads or "
      "optim_grads_params")),
    (("--ckpt-format", "fsdp_dtensor"), None,
     ("--ckpt-format fsdp_dtensor is tested only with Megatron-FSDP",
      ("--ckpt-format", "--use-megatron-fsdp"),
      "add --use-megatron-fsdp, or choose --ckpt-format torch_dist")),
    (("--fsdp-manual-registration",), None,
     ("--fsdp-manual-registration works only with --use-megatron-fsdp",
      ("--fsdp-manual-registration", "--use-megatron-fsdp"),
      "add --use-megatron-fsdp, or drop --fsdp-manual-registration")),
    (MEGATRON_FSDP + ("--fsdp-manual-registration",), None,
     ("--fsdp-manual-registration works only with --use-nccl-ub",
      ("--fsdp-manual-registration", "--use-nccl-ub"),
      "add --use-nccl-ub, or drop --fsdp-manual-registration")),
])
def test_each_rule_reports_its_message_flags_and_hint(argv, packages, expected):
    _, found = outcome(*argv, packages=packages, environ={"WORLD_SIZE": "2"})
    assert reported(found, *expected[1]) == [expected]


@pytest.mark.parametrize("argv, flag", [(FSDP2, "--use-torch-fsdp2"),
                                        (MEGATRON_FSDP, "--use-megatron-fsdp")])
@pytest.mark.parametrize("connections, rejected", [("1", True), ("2", False), ("32", False)])
def test_fsdp_needs_more_than_one_device_connection(argv, flag, connections, rejected):
    _, found = outcome(*argv, environ={"CUDA_DEVICE_MAX_CONNECTIONS": connections})
    problems = reported(found, flag, "CUDA_DEVICE_MAX_CONNECTIONS")
    if rejected:
        assert problems == [(f"{flag} needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, found 1",
                             (flag, "CUDA_DEVICE_MAX_CONNECTIONS"),
                             "unset CUDA_DEVICE_MAX_CONNECTIONS or set it to 32")]
    else:
        assert problems == []


@pytest.mark.parametrize("torch, rejected", [("2.3.9", True), ("2.4.0", False), (None, False)])
def test_torch_fsdp2_needs_torch_2_4(torch, rejected):
    """An absent torch (None: not installed on the target) is left to the launcher."""
    _, found = outcome(*FSDP2, packages={"torch": torch})
    assert bool(reported(found, "--use-torch-fsdp2")) is rejected


def test_megatron_fsdp_v1_turns_on_the_distributed_optimizer():
    resolved, found = outcome(*MEGATRON_FSDP)
    assert found == []
    assert provenance(resolved, "use_distributed_optimizer") == (
        True, "derived", "Megatron-FSDP v1 runs on the distributed optimizer",
        ("use_megatron_fsdp",))
    assert warned(resolved, "--use-distributed-optimizer") == [
        ("--use-distributed-optimizer is turned on: Megatron-FSDP v1 needs it",
         ("--use-megatron-fsdp", "--use-distributed-optimizer"))]
    assert provenance(resolved, "use_custom_fsdp") == (
        True, "derived", "legacy name of --use-megatron-fsdp", ("use_megatron_fsdp",))


def test_megatron_fsdp_v1_keeps_a_given_distributed_optimizer_quietly():
    resolved, found = outcome(*MEGATRON_FSDP, "--use-distributed-optimizer")
    assert found == []
    assert resolved.source("use_distributed_optimizer").source == "command-line"
    assert warned(resolved, "--use-distributed-optimizer") == []


def test_megatron_fsdp_v2_leaves_the_distributed_optimizer_off():
    resolved, found = outcome(*MEGATRON_FSDP, "--megatron-fsdp-version", "2")
    assert found == []
    assert resolved.use_distributed_optimizer is False


def test_without_megatron_fsdp_there_is_no_legacy_setting():
    resolved, found = outcome()
    assert found == []
    assert "use_custom_fsdp" not in resolved


def test_nccl_user_buffers_turn_on_both_buffers():
    resolved, found = outcome(*MEGATRON_FSDP, "--use-nccl-ub")
    assert found == []
    for dest in ("fsdp_manual_registration", "fsdp_double_buffer"):
        assert provenance(resolved, dest) == (
            True, "derived", "NCCL user buffers with Megatron-FSDP register them by hand",
            ("use_megatron_fsdp", "nccl_ub"))
    assert warned(resolved, "--use-nccl-ub") == [
        ("--fsdp-double-buffer and --fsdp-manual-registration are turned on for --use-nccl-ub",
         ("--use-nccl-ub", "--fsdp-double-buffer"))]


def test_the_max_pool_allocator_turns_on_the_double_buffer():
    resolved, found = outcome(*MEGATRON_FSDP, "--megatron-fsdp-max-pool-double-buffer")
    assert found == []
    assert provenance(resolved, "fsdp_double_buffer") == (
        True, "derived", "the max-pool allocator is a kind of double buffer",
        ("megatron_fsdp_max_pool_double_buffer",))
    assert resolved.fsdp_manual_registration is False


def test_sharded_gradients_with_accumulation_fusion_are_a_warning():
    resolved, found = outcome(*MEGATRON_FSDP, "--data-parallel-sharding-strategy", "optim_grads")
    assert found == []
    assert warned(resolved, "--data-parallel-sharding-strategy") == [
        ("gradient accumulation fusion with sharded gradients needs a Transformer Engine that "
         "supports it under Megatron-FSDP; check your version",
         ("--no-gradient-accumulation-fusion", "--data-parallel-sharding-strategy"))]
    quiet, _ = outcome(*MEGATRON_FSDP, "--data-parallel-sharding-strategy", "optim")
    assert warned(quiet, "--data-parallel-sharding-strategy") == []


def test_the_expert_sharding_strategy_counts_too():
    _, found = outcome(*MEGATRON_FSDP, "--num-experts", "2",
                       "--check-weight-hash-across-dp-replicas-interval", "10",
                       "--data-parallel-sharding-strategy", "optim",
                       "--expert-data-parallel-sharding-strategy", "optim_grads_params")
    assert reported(found, "--check-weight-hash-across-dp-replicas-interval")


@pytest.mark.parametrize("name, dtype", [("bf16", "torch.bfloat16"), ("fp32", "torch.float32"),
                                         ("fp16", "torch.float16")])
def test_dtype_names_become_torch_dtypes(name, dtype):
    resolved, found = outcome(*MEGATRON_FSDP, "--megatron-fsdp-main-grads-dtype", name)
    assert found == []
    value, source, reason, inputs = provenance(resolved, "megatron_fsdp_main_grads_dtype")
    assert (str(value), source, reason, inputs) == (
        dtype, "derived", "dtype name to torch dtype", ("megatron_fsdp_main_grads_dtype",))


def test_fsdp2_turns_off_fp8_param_gather_with_transformer_engine_2():
    resolved, found = outcome(*FSDP2, "--fp8-param-gather", "--fp8-format", "e4m3", "--bf16")
    assert found == []
    assert provenance(resolved, "fp8_param_gather") == (
        False, "derived", "FSDP2 does not all-gather FP8 params with Transformer Engine 2",
        ("use_torch_fsdp2",))
    assert warned(resolved, "--fp8-param-gather") == [
        ("--fp8-param-gather is turned off: FSDP2 gathers bf16 params with Transformer Engine "
         ">= 2.0", ("--fp8-param-gather", "--use-torch-fsdp2"))]


def test_fsdp_streams_say_why():
    resolved, found = outcome(*FSDP2)
    assert found == []
    assert provenance(resolved, "high_priority_stream_groups") == (
        ["dp_cp"], "derived", "FSDP data-parallel collectives run on high-priority streams",
        ("use_torch_fsdp2", "use_megatron_fsdp", "expert_model_parallel_size"))


# -- FSDP on its own: a check of another plugin's setting does not apply without it ------


def alone(*argv: str, capability=(9, 0), transformer_engine: str = "2.17.1"):
    """Resolve with the fsdp plugin as the only plugin (no built-ins, no feature plugins)."""
    import megaplug_fsdp

    kernel, rest = megaplug.load(list(argv), builtins=[megaplug_fsdp],
                                 environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"})
    target = megaplug.TargetEnvironment(packages={"transformer_engine": transformer_engine,
                                                  "torch": "2.13.0"},
                                        device_capability=capability)
    try:
        return kernel.resolve(rest, environ={}, target=target), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


@pytest.mark.parametrize("argv", [
    ("--use-torch-fsdp2",),
    ("--use-megatron-fsdp",),
    ("--use-megatron-fsdp", "--megatron-fsdp-version", "2"),
    ("--use-megatron-fsdp", "--data-parallel-sharding-strategy", "optim_grads"),
    ("--use-megatron-fsdp", "--data-parallel-sharding-strategy", "no_shard"),
])
def test_alone_fsdp_applies_no_check_of_absent_settings(argv):
    resolved, found = alone(*argv)
    assert found == [], [str(p) for p in found]
    assert [str(w) for w in resolved.warnings] == []
    assert (resolved.fsdp_double_buffer, resolved.fsdp_manual_registration) == (False, False)


@pytest.mark.parametrize("transformer_engine", ["2.5.0", "2.17.1"])
def test_alone_fsdp2_turns_off_no_param_gather_it_cannot_see(transformer_engine):
    resolved, found = alone("--use-torch-fsdp2", transformer_engine=transformer_engine)
    assert found == []
    assert [str(w) for w in resolved.warnings] == []


def test_alone_manual_registration_still_needs_nccl_user_buffers():
    _, found = alone("--use-megatron-fsdp", "--fsdp-manual-registration")
    assert [p.message for p in found] == [
        "--fsdp-manual-registration works only with --use-nccl-ub"]


def test_streams_without_the_moe_plugin_leave_out_expert_groups():
    resolved, found = outcome("-p", "no:moe", *FSDP2)
    assert found == []
    assert resolved.high_priority_stream_groups == ["dp_cp"]


def test_streams_keep_the_groups_the_user_gave():
    resolved, found = outcome(*FSDP2, "--high-priority-stream-groups", "tp")
    assert found == []
    assert resolved.high_priority_stream_groups == ["tp", "dp_cp"]


def test_megatron_fsdp_without_a_visible_gpu_has_no_stream_groups():
    resolved, found = outcome(*MEGATRON_FSDP, capability=None)
    assert found == []
    assert resolved.high_priority_stream_groups == []


# -- settings the stand-in host of conftest.py declares --------------------------------


def test_fsdp2_turns_off_fp4_param_gather_before_transformer_engine_2_7(resolve):
    resolved = resolve(*FSDP2, "--fp4-param-gather", packages={"transformer_engine": "2.5.0"})
    assert provenance(resolved, "fp4_param_gather") == (
        False, "derived", "FSDP2 gathers FP4 params only with Transformer Engine >= 2.7",
        ("use_torch_fsdp2",))
    assert warned(resolved, "--fp4-param-gather") == [
        ("--fp4-param-gather is turned off: FSDP2 gathers FP4 params only with Transformer "
         "Engine >= 2.7", ("--fp4-param-gather", "--use-torch-fsdp2"))]


def test_megatron_fsdp_turns_off_mxfp8_grad_buffer_reuse(resolve):
    resolved = resolve(*MEGATRON_FSDP, "--reuse-grad-buf-for-mxfp8-param-ag")
    assert provenance(resolved, "reuse_grad_buf_for_mxfp8_param_ag") == (
        False, "derived", "Megatron-FSDP has no MXFP8 grad-buffer reuse step",
        ("use_megatron_fsdp",))


# -- what FSDP changes in built-in rules while it is in use ------------------------------


def _connections_warning(implementation: str) -> tuple:
    return (f"tensor or context parallelism with {implementation} wants opposite "
            f"CUDA_DEVICE_MAX_CONNECTIONS settings (1 for TP/CP, more for {implementation}); "
            "performance may suffer",
            ("--tensor-model-parallel-size", "--context-parallel-size"))


@pytest.mark.parametrize("argv, implementation", [
    (FSDP2 + ("--tensor-model-parallel-size", "2"), "Torch-FSDP2"),
    (MEGATRON_FSDP + ("--context-parallel-size", "2"), "Megatron-FSDP"),
])
def test_fsdp_turns_the_device_connection_error_into_a_warning_before_blackwell(argv,
                                                                               implementation):
    resolved, found = outcome(*argv, environ={"WORLD_SIZE": "2"})
    assert found == []
    assert warned(resolved, "--tensor-model-parallel-size") == [
        _connections_warning(implementation)]


def test_without_fsdp_the_device_connection_rule_is_an_error():
    _, found = outcome("--tensor-model-parallel-size", "2", environ={"WORLD_SIZE": "2"})
    assert reported(found, "CUDA_DEVICE_MAX_CONNECTIONS")


@pytest.mark.parametrize("argv, world, capability", [
    (FSDP2 + ("--tensor-model-parallel-size", "2"), "2", (10, 0)),   # Blackwell
    (FSDP2 + ("--tensor-model-parallel-size", "2"), "2", None),      # no GPU known
    (FSDP2, "1", (9, 0)),                                            # no TP or CP
])
def test_no_device_connection_warning_without_a_conflict(argv, world, capability):
    resolved, found = outcome(*argv, capability=capability, environ={"WORLD_SIZE": world})
    assert found == []
    assert warned(resolved, "--tensor-model-parallel-size") == []


@pytest.mark.parametrize("argv, expected", [
    (("--ckpt-format", "torch_dcp"),
     ("--ckpt-format torch_dcp is only supported with --use-torch-fsdp2", ("--ckpt-format",),
      "add --use-torch-fsdp2, or use --ckpt-format torch_dist")),
    (MEGATRON_FSDP + ("--dynamic-context-parallel",),
     ("--dynamic-context-parallel does not work with Megatron-FSDP",
      ("--dynamic-context-parallel", "--use-megatron-fsdp"), "drop one of them")),
    (FSDP2 + ("--optimizer", "muon"),
     ("--optimizer muon does not support --use-torch-fsdp2 yet",
      ("--optimizer", "--use-torch-fsdp2"),
      "use --optimizer adam or sgd, or drop --use-torch-fsdp2")),
    (MEGATRON_FSDP + ("--optimizer", "lion"),
     ("--optimizer lion does not support --use-megatron-fsdp yet",
      ("--optimizer", "--use-megatron-fsdp"),
      "use --optimizer adam or sgd, or drop --use-megatron-fsdp")),
])
def test_rules_fsdp_adds_to_built_in_settings_report_message_flags_and_hint(argv, expected):
    _, found = outcome(*argv)
    assert reported(found, *expected[1]) == [expected]


@pytest.mark.parametrize("argv", [
    FSDP2 + ("--ckpt-format", "torch_dcp"),
    FSDP2 + ("--optimizer", "sgd"),
    MEGATRON_FSDP + ("--optimizer", "adam"),
    ("--optimizer", "muon"),
])
def test_fsdp_accepts_what_it_supports(argv):
    _, found = outcome(*argv)
    assert reported(found, "--optimizer") == [] and reported(found, "--ckpt-format") == []
