"""What each MoE rule reports, whole: the message, every flag it names and the hint; and
for each derivation, the value, why and from what.

A problem is found by the flags it names, not by the plugin or module holding the rule.
Most cases resolve with every installed plugin (``megaplug.testing``); settings of the
seed's newer Megatron that no plugin declares yet come from the stand-ins of conftest.py.
"""

from __future__ import annotations

from typing import Optional

import pytest

import megaplug
from megaplug.testing import resolve


def full_stack_problems(*argv: str, world: int = 1,
                        capability: Optional[tuple[int, int]] = (9, 0)) -> list:
    target = megaplug.TargetEnvironment(device_capability=capability)
    try:
        resolve(*argv, environ={"WORLD_SIZE": str(world)}, target=target)
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


def reported(found: list, *flags: str) -> list[tuple[str, tuple[str, ...], Optional[str]]]:
    """(message, flags, hint) of each problem naming all of ``flags``."""
    return [(p.message, tuple(p.flags), p.hint) for p in found if set(flags) <= set(p.flags)]


@pytest.mark.parametrize("argv, world, capability, expected", [
    (("--expert-model-parallel-size", "2"), 2, (9, 0),
     ("--expert-model-parallel-size 2 needs an MoE model, but --num-experts is not set (or 0)",
      ("--expert-model-parallel-size", "--num-experts"),
      "set --num-experts, or use --expert-model-parallel-size 1")),
    (("--num-experts", "6", "--expert-model-parallel-size", "4"), 4, (9, 0),
     ("--num-experts 6 is not a multiple of --expert-model-parallel-size 4",
      ("--num-experts", "--expert-model-parallel-size"),
      "use a multiple of 4 experts, or an expert parallel size that divides 6: 1, 2, 3 or 6")),
    (("--num-experts", "3", "--expert-model-parallel-size", "2"), 2, (9, 0),
     ("--num-experts 3 is not a multiple of --expert-model-parallel-size 2",
      ("--num-experts", "--expert-model-parallel-size"),
      "use a multiple of 2 experts, or an expert parallel size that divides 3: 1 or 3")),
    (("--num-experts", "1", "--expert-model-parallel-size", "2"), 2, (9, 0),
     ("--num-experts 1 is not a multiple of --expert-model-parallel-size 2",
      ("--num-experts", "--expert-model-parallel-size"),
      "use a multiple of 2 experts, or an expert parallel size that divides 1: 1")),
    (("--num-experts", "2", "--moe-grouped-gemm"), 1, (7, 5),
     ("--moe-grouped-gemm needs compute capability 8.0 or newer, the target GPU has 7.5",
      ("--moe-grouped-gemm",), "drop --moe-grouped-gemm, or run on an Ampere or newer GPU")),
    (("--num-experts", "2", "--moe-use-upcycling"), 1, (9, 0),
     ("--moe-use-upcycling needs --save: the upcycled model is written there",
      ("--moe-use-upcycling", "--save"), "add --save DIR")),
    (("--num-experts", "2", "--moe-latent-size", "0"), 1, (9, 0),
     ("--moe-latent-size must be greater than 0, got 0", ("--moe-latent-size",),
      "give a positive latent dimension, or leave the flag unset")),
    (("--moe-latent-size", "8"), 1, (9, 0),
     ("--moe-latent-size 8 only applies to MoE models, but --num-experts is not set",
      ("--moe-latent-size", "--num-experts"), "set --num-experts, or drop --moe-latent-size")),
])
def test_each_rule_reports_its_message_flags_and_hint(argv, world, capability, expected):
    found = full_stack_problems(*argv, world=world, capability=capability)
    assert reported(found, *expected[1]) == [expected]


@pytest.mark.parametrize("major, minor, rejected", [(7, 5, True), (8, 0, False), (9, 0, False)])
def test_grouped_gemm_needs_ampere(major, minor, rejected):
    found = full_stack_problems("--num-experts", "2", "--moe-grouped-gemm",
                                capability=(major, minor))
    assert bool(reported(found, "--moe-grouped-gemm")) is rejected


def test_grouped_gemm_without_a_visible_gpu_is_a_warning():
    resolved = resolve("--num-experts", "2", "--moe-grouped-gemm",
                       target=megaplug.TargetEnvironment(device_capability=None))
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings
            if "--moe-grouped-gemm" in w.flags] == [
        ("--moe-grouped-gemm needs a GPU of compute capability 8.0 or newer; no GPU is visible, "
         "so this is not checked", ("--moe-grouped-gemm",))]


def _provenance(resolved: megaplug.Resolved, dest: str) -> tuple:
    record = resolved.source(dest)
    return resolved[dest], record.source, record.reason, tuple(record.inputs)


def test_zero_experts_is_a_dense_model():
    resolved = resolve("--num-experts", "0")
    assert _provenance(resolved, "num_experts") == (
        None, "normalized", "0 experts means a dense model", ("num_experts",))


@pytest.mark.parametrize("tp", [1, 2])
def test_expert_tensor_parallelism_defaults_to_tensor_parallelism(tp):
    resolved = resolve("--num-experts", "2", "--tensor-model-parallel-size", str(tp),
                       "--disable-bias-linear", environ={"WORLD_SIZE": str(tp)})
    assert _provenance(resolved, "expert_tensor_parallel_size") == (
        tp, "derived", "defaults to --tensor-model-parallel-size",
        ("tensor_model_parallel_size",))


def test_a_given_expert_tensor_parallel_size_is_kept():
    resolved = resolve("--num-experts", "2", "--expert-tensor-parallel-size", "1",
                       "--tensor-model-parallel-size", "2", environ={"WORLD_SIZE": "2"})
    assert _provenance(resolved, "expert_tensor_parallel_size")[:2] == (1, "command-line")


def test_expert_ffn_size_defaults_to_the_dense_one_with_a_warning():
    resolved = resolve("--num-experts", "2", "--ffn-hidden-size", "96")
    assert _provenance(resolved, "moe_ffn_hidden_size") == (
        96, "derived", "defaults to --ffn-hidden-size", ("ffn_hidden_size",))
    assert [(w.message, tuple(w.flags)) for w in resolved.warnings
            if "--moe-ffn-hidden-size" in w.flags] == [
        ("--moe-ffn-hidden-size is not set; experts use --ffn-hidden-size (96)",
         ("--moe-ffn-hidden-size", "--ffn-hidden-size"))]


def test_a_dense_model_has_no_expert_ffn_size():
    resolved = resolve("--ffn-hidden-size", "96")
    assert resolved.moe_ffn_hidden_size is None
    assert not [w for w in resolved.warnings if "--moe-ffn-hidden-size" in w.flags]


def test_upcycling_turns_off_loading_the_optimizer_and_rng_state():
    resolved = resolve("--num-experts", "2", "--moe-use-upcycling", "--save", "/ckpt",
                       "--save-interval", "1")
    for dest, flag in (("no_load_optim", "--no-load-optim"), ("no_load_rng", "--no-load-rng")):
        assert _provenance(resolved, dest) == (True, "derived", "required by --moe-use-upcycling",
                                               ("moe_use_upcycling",))
        assert [(w.message, tuple(w.flags)) for w in resolved.warnings if flag in w.flags] == [
            (f"--moe-use-upcycling turns on {flag}", (flag, "--moe-use-upcycling"))]


def test_upcycling_leaves_what_is_already_off_alone():
    resolved = resolve("--num-experts", "2", "--moe-use-upcycling", "--save", "/ckpt",
                       "--save-interval", "1", "--no-load-optim")
    assert resolved.source("no_load_optim").source == "command-line"
    assert not [w for w in resolved.warnings if "--no-load-optim" in w.flags]
    assert resolved.source("no_load_rng").source == "derived"


@pytest.mark.parametrize("value, stored", [(["aux_loss"], "aux_loss"),
                                           (["aux_loss", "seq_aux_loss"],
                                            ["aux_loss", "seq_aux_loss"])])
def test_a_single_router_balancing_type_is_stored_unwrapped(value, stored):
    coefficients = ["0.01"] * len(value)   # one per balancing type (Megatron's model build)
    resolved = resolve("--num-experts", "2", "--moe-router-load-balancing-type", *value,
                       "--moe-aux-loss-coeff", *coefficients)
    assert resolved.moe_router_load_balancing_type == stored
    if len(value) == 1:
        assert _provenance(resolved, "moe_router_load_balancing_type") == (
            stored, "normalized", "a single value is stored unwrapped",
            ("moe_router_load_balancing_type",))


def test_a_single_aux_loss_coefficient_is_stored_unwrapped():
    resolved = resolve("--num-experts", "2", "--moe-aux-loss-coeff", "0.5")
    assert resolved.moe_aux_loss_coeff == 0.5
    assert resolved.source("moe_aux_loss_coeff").inputs == ("moe_aux_loss_coeff",)


@pytest.mark.parametrize("experts", ["-3", "-1"])
def test_a_negative_expert_count_is_reported_not_raised(experts):
    # once an IndexError: the hint listed the divisors of the count, and a count below one
    # has none
    found = full_stack_problems("--num-experts", experts, "--expert-model-parallel-size", "2",
                                world=2)
    assert [p.message for p in found if "raised" in p.message] == []
    assert reported(found, "--num-experts", "--expert-model-parallel-size") == [
        (f"--num-experts {experts} is not a multiple of --expert-model-parallel-size 2",
         ("--num-experts", "--expert-model-parallel-size"),
         "use a positive multiple of 2 experts")]


# -- settings no plugin declares yet: the stand-ins of conftest.py ----------------------


def stand_in_problems(kernel, *argv: str) -> list:
    try:
        kernel.resolve(list(argv), environ={},
                       target=megaplug.TargetEnvironment(device_capability=(9, 0)))
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


@pytest.mark.parametrize("argv, expected", [
    (("--moe-shortcut-connection", "--use-torch-fsdp2"),
     ("--moe-shortcut-connection does not work with --use-torch-fsdp2: the shortcut block skips "
      "the per-layer parameter all-gathers, leaving parameters sharded",
      ("--moe-shortcut-connection", "--use-torch-fsdp2"),
      "use DDP or --use-distributed-optimizer instead of FSDP")),
    (("--moe-shortcut-connection", "--use-megatron-fsdp"),
     ("--moe-shortcut-connection does not work with --use-megatron-fsdp: the shortcut block "
      "skips the per-layer parameter all-gathers, leaving parameters sharded",
      ("--moe-shortcut-connection", "--use-megatron-fsdp"),
      "use DDP or --use-distributed-optimizer instead of FSDP")),
    (("--moe-shortcut-connection", "--cuda-graph-impl", "transformer_engine"),
     ("--moe-shortcut-connection supports CUDA graphs only with --cuda-graph-impl local and "
      "--inference-cuda-graph-scope block (got --cuda-graph-impl transformer_engine)",
      ("--moe-shortcut-connection", "--cuda-graph-impl"),
      "use --cuda-graph-impl local --inference-cuda-graph-scope block, or --cuda-graph-impl "
      "none")),
    (("--moe-shortcut-connection", "--cuda-graph-impl", "local"),
     ("--moe-shortcut-connection supports CUDA graphs only with --cuda-graph-impl local and "
      "--inference-cuda-graph-scope block (got --cuda-graph-impl local)",
      ("--moe-shortcut-connection", "--cuda-graph-impl"),
      "use --cuda-graph-impl local --inference-cuda-graph-scope block, or --cuda-graph-impl "
      "none")),
    (("--moe-megakernel-backend", "mok", "--use-megatron-fsdp"),
     ("the 'mok' MoE megakernel backend is not validated with --use-megatron-fsdp",
      ("--moe-megakernel-backend", "--use-megatron-fsdp"),
      "choose another megakernel backend, or drop FSDP")),
    (("--moe-use-norm-before-up-proj",),
     ("--moe-use-norm-before-up-proj needs --moe-latent-size",
      ("--moe-use-norm-before-up-proj", "--moe-latent-size"),
      "set --moe-latent-size, or drop --moe-use-norm-before-up-proj")),
])
def test_rules_on_newer_settings_report_message_flags_and_hint(kernel, argv, expected):
    found = stand_in_problems(kernel, "--num-experts", "2", *argv)
    assert reported(found, *expected[1]) == [expected]


@pytest.mark.parametrize("argv", [
    ("--moe-shortcut-connection",),
    ("--moe-shortcut-connection", "--cuda-graph-impl", "local",
     "--inference-cuda-graph-scope", "block"),
    ("--moe-megakernel-backend", "mok"),
    ("--moe-megakernel-backend", "other", "--use-megatron-fsdp"),
    ("--moe-use-norm-before-up-proj", "--moe-latent-size", "4"),
])
def test_newer_settings_in_a_working_combination_are_accepted(kernel, argv):
    assert stand_in_problems(kernel, "--num-experts", "2", *argv) == []


class NewerMoeSettings:
    """Declares the seed's newer MoE settings, next to every installed plugin, so the rules
    that read them meet the real neighbours (the inference plugin's enum scope)."""

    megaplug_plugin = megaplug.PluginInfo(name="newer_moe_settings")

    @megaplug.hookimpl
    def add_args(self, flags) -> None:
        flags.add_argument("--moe-shortcut-connection", action="store_true")


@pytest.mark.parametrize("argv, rejected", [
    (("--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"), False),
    (("--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "layer"), True),
    (("--cuda-graph-impl", "none"), False),
])
def test_shortcut_blocks_with_the_real_cuda_graph_scope(argv, rejected):
    try:
        resolve("--num-experts", "2", "--moe-shortcut-connection", *argv,
                plugins=[NewerMoeSettings()])
        found = []
    except megaplug.ConfigError as error:
        found = list(error.problems)
    assert bool(reported(found, "--moe-shortcut-connection", "--cuda-graph-impl")) is rejected


def test_a_layer_frequency_that_is_no_number_says_what_is_expected():
    found = full_stack_problems("--num-experts", "2", "--moe-layer-freq", "abc")
    assert [p.message for p in found if "--moe-layer-freq" in p.flags] == [
        "--moe-layer-freq: invalid moe_freq_type value 'abc' (expected an integer or a list "
        "pattern such as '([1]*3+[0]*1)*3', got 'abc')"]


# -- MoE's checks on built-in settings, and the built-in rule it takes over --------------

ACROSS_BASE = ["-p", "no:preflight", "--train-iters", "10", "--lr", "1e-4", "--micro-batch-size",
               "2", "--num-experts", "4", "--expert-model-parallel-size", "2"]
TP2 = ("--tensor-model-parallel-size", "2", "--sequence-parallel")
ROUTER_GRAPHS = ("--delay-wgrad-compute", "--overlap-grad-reduce", "--cuda-graph-impl",
                 "transformer_engine", "--cuda-graph-modules", "moe_router",
                 "--moe-shared-expert-intermediate-size", "64")
ROUTER_FLAGS = ("--delay-wgrad-compute", "--cuda-graph-modules",
                "--moe-shared-expert-intermediate-size")


def across(*argv: str, te: str = "2.17.1", capability=(9, 0), connections: str = "1"):
    environ = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": connections}
    target = megaplug.TargetEnvironment(packages={"transformer_engine": te},
                                        device_capability=capability, environ=environ)
    try:
        return resolve(*ACROSS_BASE, *argv, environ=environ, target=target), []
    except megaplug.ConfigError as error:
        return None, list(error.problems)


def test_the_flex_dispatcher_needs_real_communication():
    _, found = across("--fake-process-group", "--moe-token-dispatcher-type", "flex")
    assert reported(found, "--fake-process-group") == [
        ("--fake-process-group does not work with --moe-token-dispatcher-type flex",
         ("--fake-process-group", "--moe-token-dispatcher-type"),
         "use the alltoall or allgather dispatcher with a fake process group")]


@pytest.mark.parametrize("argv", [("--fake-process-group",),
                                  ("--moe-token-dispatcher-type", "flex")])
def test_flex_or_a_fake_process_group_alone_is_fine(argv):
    _, found = across(*argv)
    assert reported(found, "--fake-process-group", "--moe-token-dispatcher-type") == []


def test_a_graphed_router_with_delayed_wgrad_needs_transformer_engine_2_12():
    _, found = across(*ROUTER_GRAPHS, te="2.11.0")
    assert reported(found, "--delay-wgrad-compute") == [
        ("a CUDA-graphed router beside shared experts, with --delay-wgrad-compute, requires "
         "transformer_engine >= 2.12.0, found 2.11.0", ROUTER_FLAGS,
         "upgrade Transformer Engine to 2.12.0 or later, or add --moe-shared-expert-overlap")]


def test_a_graphed_router_with_delayed_wgrad_needs_accumulation_fusion():
    _, found = across(*ROUTER_GRAPHS, "--no-gradient-accumulation-fusion")
    assert reported(found, "--delay-wgrad-compute") == [
        ("a CUDA-graphed router beside shared experts, with --delay-wgrad-compute, needs "
         "gradient accumulation fusion (its static buffers are what graphs can capture)",
         (*ROUTER_FLAGS, "--no-gradient-accumulation-fusion"),
         "drop --no-gradient-accumulation-fusion")]


@pytest.mark.parametrize("argv, te", [
    (ROUTER_GRAPHS, "2.12.0"),                                   # the minimum itself
    (ROUTER_GRAPHS + ("--moe-shared-expert-overlap",), "2.11.0"),
    (ROUTER_GRAPHS[:-2], "2.11.0"),                              # no shared experts
    (ROUTER_GRAPHS[2:], "2.11.0"),                               # no delayed wgrad
    # Megatron asks only while gradient reduction overlaps (wgrad_in_graph_scope)
    (tuple(a for a in ROUTER_GRAPHS if a != "--overlap-grad-reduce"), "2.11.0"),
])
def test_graphed_routers_that_need_nothing_more(argv, te):
    _, found = across(*argv, te=te)
    assert [p.message for p in found if p.plugin == "moe"] == []


def test_with_attention_graphed_too_the_version_is_reported_once():
    argv = ("--delay-wgrad-compute", "--overlap-grad-reduce", "--cuda-graph-impl",
            "transformer_engine", "--cuda-graph-modules", "attn", "moe_router",
            "--moe-shared-expert-intermediate-size", "64")
    _, found = across(*argv, te="2.11.0")
    version = [p for p in found if "with --delay-wgrad-compute" in p.message
               and "requires transformer_engine >= 2.12.0" in p.message]
    assert len(version) == 1   # reported once, not by both plugins


EP_OVERLAP_ADVICE = (
    "on Hopper and older GPUs, tensor or context parallelism wants CUDA_DEVICE_MAX_CONNECTIONS=1 "
    "while --overlap-moe-expert-parallel-comm wants more; set it to 1 or 32 depending on which "
    "to favour",
    ("--tensor-model-parallel-size", "--context-parallel-size",
     "--overlap-moe-expert-parallel-comm"))


def _advice(resolved) -> list:
    return [(w.message, tuple(w.flags)) for w in resolved.warnings
            if "--overlap-moe-expert-parallel-comm" in w.flags]


@pytest.mark.parametrize("argv, capability, advised", [
    (TP2, (9, 0), True),
    (("--context-parallel-size", "2"), (8, 0), True),
    (TP2, (10, 0), False),        # Blackwell: no conflict
    (TP2, None, False),           # no GPU known
    ((), (9, 0), False),          # neither TP nor CP
])
def test_expert_parallel_overlap_advice_on_connections(argv, capability, advised):
    resolved, found = across(*argv, "--overlap-moe-expert-parallel-comm",
                             capability=capability, connections="32")
    assert found == [], [str(p) for p in found]
    assert _advice(resolved) == ([EP_OVERLAP_ADVICE] if advised else [])



def test_without_the_parallel_plugin_moe_reads_no_tensor_or_context_parallelism():
    resolved = resolve("-p", "no:parallel", "-p", "no:preflight", "--num-experts", "2",
                       "--overlap-moe-expert-parallel-comm",
                       target=megaplug.TargetEnvironment(device_capability=(9, 0)))
    assert resolved.expert_tensor_parallel_size == 1
    assert _advice(resolved) == []
