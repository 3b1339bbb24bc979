"""Built-in rules that differ between Megatron releases apply at the release lines they
belong to and not at the others (docs/megatron-release-rules.md lists them).

Each test resolves one configuration with the target's Megatron stated
(``TargetEnvironment(packages={"megatron_core": VERSION})``) at every line on both sides of
the difference.
"""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.testing import problems, resolve

NO_MSC = {"multistorageclient": None}
#: The pre-flight checks are Megatron main's model-building checks: not what these test.
NO_PREFLIGHT = ("-p", "no:preflight")


def target(version: str, environ: dict[str, str] | None = None,
           **packages: str | None) -> TargetEnvironment:
    return TargetEnvironment(packages={"megatron_core": version, **NO_MSC, **packages},
                             device_capability=(9, 0), environ=environ or {})


def resolve_at(version: str, *flags: str, **packages: str | None):
    return resolve(*NO_PREFLIGHT, *flags, target=target(version, **packages))


def messages(version: str, *flags: str, environ: dict[str, str] | None = None,
             plugin: str | None = None, **packages: str | None) -> list[str]:
    found = problems(*NO_PREFLIGHT, *flags, target=target(version, environ, **packages),
                     environ=environ or {})
    return [p.message for p in found if plugin is None or p.plugin == plugin]


# -- resilience: MSC on by default before 0.18, opt-in and package-checked from 0.18 --------

@pytest.mark.parametrize("version", ["0.13.1", "0.15.3", "0.17.1"])
def test_msc_is_not_package_checked_before_0_18(version):
    config = resolve_at(version)
    assert config.enable_msc is True
    assert not [w for w in config.warnings if "multi-storage" in w.message]


@pytest.mark.parametrize("version", ["0.13.1", "0.17.1"])
def test_disable_msc_is_said_before_0_18(version):
    config = resolve_at(version, "--disable-msc")
    assert config.enable_msc is False
    assert [w.message for w in config.warnings if w.plugin == "resilience"] == [
        "the multi-storage client (MSC) is disabled"]


@pytest.mark.parametrize("version", ["0.18.2", "0.19.0", "main"])
def test_enable_msc_needs_the_package_from_0_18(version):
    assert messages(version, "--enable-msc", plugin="resilience") == [
        "--enable-msc requires multistorageclient, not installed"]
    assert resolve_at(version).enable_msc is False


# -- training: the layer-wise distributed optimizer (0.18+), early Muon checks (0.16, 0.17) --

@pytest.mark.parametrize("version", ["0.18.2", "0.19.0", "main"])
def test_muon_with_distributed_optimizer_is_layer_wise_from_0_18(version):
    config = resolve_at(version, "--optimizer", "muon", "--use-distributed-optimizer")
    assert config.use_layer_wise_distributed_optimizer is True
    assert config.use_distributed_optimizer is False


@pytest.mark.parametrize("version", ["0.16.1", "0.17.1"])
def test_muon_refuses_the_distributed_optimizer_in_0_16_and_0_17(version):
    line = version  # messages name the exact release in force
    assert messages(version, "--optimizer", "muon", "--use-distributed-optimizer",
                    plugin="training") == [
        f"--optimizer muon does not support --use-distributed-optimizer in Megatron {line}"]


@pytest.mark.parametrize("version", ["0.13.1", "0.16.1", "0.17.1"])
def test_no_layer_wise_setting_before_0_18(version):
    config = resolve_at(version)
    assert "use_layer_wise_distributed_optimizer" not in config


def test_dist_muon_overlap_allowed_in_0_17_refused_in_0_16():
    flags = ("--optimizer", "dist_muon", "--overlap-grad-reduce")
    assert messages("0.17.1", *flags, plugin="training") == []
    assert messages("0.16.1", *flags, plugin="training") == [
        "--optimizer dist_muon does not support --overlap-grad-reduce in Megatron 0.16.1"]


def test_lion_has_no_muon_checks_in_0_17():
    assert messages("0.17.1", "--optimizer", "lion", "--use-distributed-optimizer",
                    plugin="training") == []


# -- training: deterministic mode before 0.19 ----------------------------------------------

@pytest.mark.parametrize("version", ["0.13.1", "0.18.2"])
def test_deterministic_mode_needs_nccl_algo_before_0_19(version):
    line = version  # messages name the exact release in force
    assert messages(version, "--deterministic-mode", plugin="training") == [
        "--deterministic-mode needs NCCL_ALGO set to one of Tree, Ring, CollnetDirect, "
        f"CollnetChain, ^NVLS in Megatron {line} (it is unset)"]
    assert messages(version, "--deterministic-mode", environ={"NCCL_ALGO": "Tree"},
                    plugin="training") == []


@pytest.mark.parametrize("version", ["0.19.0", "main"])
def test_deterministic_mode_from_0_19_takes_unset_nccl_algo_and_refuses_tree(version):
    assert messages(version, "--deterministic-mode", plugin="training") == []
    assert messages(version, "--deterministic-mode", environ={"NCCL_ALGO": "Tree"},
                    plugin="training") == [
        "NCCL_ALGO='Tree' is not a deterministic NCCL algorithm choice"]


def test_deterministic_mode_refuses_flash_attention_before_0_19_only():
    flags = ("--deterministic-mode", "--use-flash-attn")
    assert messages("0.18.2", *flags, environ={"NCCL_ALGO": "Ring"}, plugin="training") == [
        "--deterministic-mode requires: use_flash_attn=False (got True)"]
    assert messages("0.19.0", *flags, plugin="training") == []


# -- checkpointing: synchronous fallback and --skip-train's optimizer state (0.16+) ---------

ASYNC = ("--async-save", "--ckpt-format", "torch_dist", "--save", "/tmp/ckpt",
         "--save-interval", "10")


@pytest.mark.parametrize("version", ["0.16.1", "0.19.0", "main"])
def test_async_save_without_worker_is_synchronous_from_0_16(version):
    config = resolve_at(version, *ASYNC)
    assert config.async_save is False
    assert config.source("async_save").source == "derived"


@pytest.mark.parametrize("version", ["0.13.1", "0.15.3"])
def test_async_save_without_worker_kept_before_0_16(version):
    config = resolve_at(version, *ASYNC)
    assert config.async_save is True
    assert config.source("async_save").source == "command-line"


@pytest.mark.parametrize("version,source", [("0.15.3", "default"), ("0.16.1", "derived"),
                                            ("main", "derived")])
def test_skip_train_skips_optimizer_state_from_0_16(version, source):
    config = resolve_at(version, "--skip-train")
    assert config.source("no_load_optim").source == source
    assert bool(config.no_load_optim) is (source == "derived")


# -- training: Transformer Engine's fused cross entropy -------------------------------------

TE_CROSS_ENTROPY = ("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te")


@pytest.mark.parametrize("version", ["0.17.1", "0.18.0"])
def test_te_cross_entropy_taken_before_0_18_2(version):
    """megatron-core 0.18.2 added the refusal: 0.18.0 takes it."""
    assert messages(version, *TE_CROSS_ENTROPY, plugin="training") == []


@pytest.mark.parametrize("version,line", [("0.18.2", "0.18.2"), ("0.19.0", "0.19.0"),
                                          ("main", "main")])
def test_te_cross_entropy_refused_from_0_18_whatever_the_te(version, line):
    assert messages(version, *TE_CROSS_ENTROPY, plugin="training",
                    transformer_engine="2.19.0") == [
        "Transformer Engine cross entropy loss fusion (--cross-entropy-fusion-impl te) is "
        f"disabled in Megatron {line} due to stability issues"]


def test_te_cross_entropy_taken_with_te_2_19_in_the_seed_line():
    assert messages("seed", *TE_CROSS_ENTROPY, plugin="training",
                    transformer_engine="2.19.0") == []
    assert len(messages("seed", *TE_CROSS_ENTROPY, plugin="training",
                        transformer_engine="2.18.0")) == 1


# -- checkpointing: 0.19's streaming checkpoint dequantization -------------------------------

TENSORWISE = ("--fp8-format", "hybrid", "--fp8-recipe", "tensorwise", "--bf16")


def test_tensorwise_fp8_dequantizes_up_front_in_0_19():
    config = resolve_at("0.19.0", *TENSORWISE, transformer_engine="2.17.1")
    assert config.stream_ckpt_dequant is False
    assert config.source("stream_ckpt_dequant").source == "derived"
    assert resolve_at("0.19.0", transformer_engine="2.17.1").stream_ckpt_dequant is True


@pytest.mark.parametrize("version", ["0.18.2", "main"])
def test_no_streaming_dequantization_outside_0_19(version):
    assert "stream_ckpt_dequant" not in resolve_at(version, *TENSORWISE,
                                                   transformer_engine="2.17.1")


# -- training: the schedule (batch-size rampup with iterations, --skip-train) ----------------

RAMPUP = ("--train-iters", "100", "--global-batch-size", "32", "--rampup-batch-size", "8", "8",
          "1000")


@pytest.mark.parametrize("version,line", [("0.13.1", "0.13.1"), ("0.17.1", "0.17.1")])
def test_rampup_with_iterations_refused_before_0_18(version, line):
    assert messages(version, *RAMPUP, plugin="training") == [
        "--rampup-batch-size is not supported with iteration-based training (--train-iters) "
        f"in Megatron {line}"]


@pytest.mark.parametrize("version", ["0.18.2", "main"])
def test_rampup_with_iterations_taken_from_0_18(version):
    assert messages(version, *RAMPUP, plugin="training") == []


def test_skip_train_leaves_the_schedule_unchecked_from_0_17():
    flags = ("--skip-train", *RAMPUP, "--lr-decay-samples", "10")
    assert messages("0.17.1", *flags, plugin="training") == []
    assert sorted(messages("0.16.1", *flags, plugin="training")) == [
        "--rampup-batch-size is not supported with iteration-based training (--train-iters) "
        "in Megatron 0.16.1",
        "--train-iters sets iteration-based training, which cannot be combined with "
        "--lr-decay-samples"]


# -- model: multi-token prediction with context parallelism (refused in 0.13) ----------------

MTP_CP2 = ("--mtp-num-layers", "1", "--position-embedding-type", "rope",
           "--context-parallel-size", "2")


def test_mtp_with_context_parallelism_refused_in_0_13_only():
    assert messages("0.13.1", *MTP_CP2, environ={"WORLD_SIZE": "2"}, plugin="model") == [
        "multi-token prediction does not support context parallelism (--context-parallel-size 2)"
        " in Megatron 0.13"]
    assert messages("0.14.0", *MTP_CP2, environ={"WORLD_SIZE": "2"}, plugin="model") == []


# -- parallel: delayed weight-gradient computation -------------------------------------------

DELAY_OVERLAP = ("--delay-wgrad-compute", "--overlap-grad-reduce", "--use-distributed-optimizer")


def test_delay_wgrad_with_overlap_refused_in_0_13():
    assert messages("0.13.1", *DELAY_OVERLAP, plugin="parallel",
                    transformer_engine="2.17.1") == [
        "--delay-wgrad-compute does not support --overlap-grad-reduce in Megatron 0.13"]


@pytest.mark.parametrize("version,refused", [("0.14.0", False), ("0.15.3", True),
                                             ("main", True)])
def test_delay_wgrad_overlap_needs_te_2_7_in_0_14_and_2_8_later(version, refused):
    found = messages(version, *DELAY_OVERLAP, plugin="parallel", transformer_engine="2.7.0")
    assert found == (["--delay-wgrad-compute with --overlap-grad-reduce requires "
                      "transformer_engine >= 2.8.0, found 2.7.0"] if refused else [])


# -- training: CUDA graphs before --cuda-graph-impl (0.13, 0.14) and their early limits -------

@pytest.mark.parametrize("version", ["0.13.1", "0.14.0"])
def test_cuda_graph_switches_stay_settings_before_0_15(version):
    config = resolve_at(version, "--enable-cuda-graph", transformer_engine="2.17.1")
    assert config.enable_cuda_graph is True
    assert "cuda_graph_impl" not in config
    assert not [w for w in config.warnings if "deprecated" in w.message]


def test_cuda_graph_switches_become_the_implementation_from_0_15():
    config = resolve_at("0.15.3", "--enable-cuda-graph", transformer_engine="2.17.1")
    assert config.cuda_graph_impl == "local"
    assert "enable_cuda_graph" not in config


def test_te_rng_tracker_asked_for_in_0_13_turned_on_from_0_14():
    assert messages("0.13.1", "--external-cuda-graph", plugin="training",
                    transformer_engine="2.17.1") == [
        "--external-cuda-graph needs --te-rng-tracker in Megatron 0.13"]
    assert resolve_at("0.13.1", "--enable-cuda-graph").te_rng_tracker is False
    assert resolve_at("0.14.0", "--enable-cuda-graph").te_rng_tracker is True


@pytest.mark.parametrize("version,refused", [("0.13.1", False), ("0.14.0", True),
                                             ("0.15.3", True), ("0.16.1", False)])
def test_full_recompute_with_cuda_graphs_refused_in_0_14_and_0_15(version, refused):
    graphs = "--enable-cuda-graph" if version < "0.15" else "--cuda-graph-impl=local"
    found = messages(version, graphs, "--recompute-granularity", "full",
                     "--recompute-method", "uniform", "--recompute-num-layers", "1",
                     plugin="training", transformer_engine="2.17.1")
    line = version  # messages name the exact release in force
    expected = [f"CUDA graphs cannot be used with --recompute-granularity full in Megatron "
                f"{line}"]
    assert [m for m in found if "CUDA graphs" in m] == (expected if refused else [])


# -- training: --cuda-graph-scope is the line's own setting up to 0.17 ----------------------

@pytest.mark.parametrize("version", ["0.16.1", "0.17.1"])
def test_cuda_graph_scope_words_are_scope_members_in_0_16_and_0_17(version):
    from megaplug.builtin.training.enums import CudaGraphModule, CudaGraphScope

    config = resolve_at(version, "--cuda-graph-scope", "attn", "moe_router")
    assert config.cuda_graph_scope == [CudaGraphScope.attn, CudaGraphScope.moe_router]
    assert config.source("cuda_graph_scope").source == "normalized"
    assert "cuda_graph_modules" not in config  # the 0.18 setting: not in these lines
    assert not [w for w in config.warnings if "deprecated" in w.message]
    assert resolve_at(version).cuda_graph_scope == []
    assert CudaGraphModule.attn.name == CudaGraphScope.attn.name


@pytest.mark.parametrize("version", ["0.13.1", "0.15.3"])
def test_cuda_graph_scope_is_one_word_before_0_16(version):
    assert resolve_at(version, "--cuda-graph-scope", "attn").cuda_graph_scope == "attn"
    assert resolve_at(version).cuda_graph_scope == "full"


def test_cuda_graph_scope_full_is_the_empty_scope_in_0_17_and_retired_from_0_18():
    config = resolve_at("0.17.1", "--cuda-graph-scope", "full")
    assert config.cuda_graph_scope == []
    assert [w.message for w in config.warnings if w.plugin == "training"] == [
        "--cuda-graph-scope full is deprecated; an empty scope captures the whole layer"]
    assert messages("0.17.1", "--cuda-graph-scope", "full", "attn", plugin="training") == [
        "--cuda-graph-scope full cannot be used with other scopes"]
    assert messages("0.16.1", "--cuda-graph-scope", "full_iteration_inference",
                    plugin="training") == [
        "--cuda-graph-scope: invalid choice 'full_iteration_inference' (choose from "
        "full_iteration, attn, mlp, moe, moe_router, moe_preprocess, mamba)"]
    newest = resolve_at("0.18.2", "--cuda-graph-scope", "attn")
    assert "cuda_graph_scope" not in newest and newest.cuda_graph_modules[0].name == "attn"


@pytest.mark.parametrize("version,line", [("0.14.0", "0.14.0"), ("0.17.1", "0.17.1")])
def test_local_full_iteration_scope_needs_no_nan_check_in_0_14_and_0_17(version, line):
    flags = ("--cuda-graph-scope", "full_iteration", "--cuda-graph-impl", "local")
    if version == "0.14.0":
        flags = ("--cuda-graph-scope", "full_iteration", "--enable-cuda-graph")
    assert messages(version, *flags, plugin="training") == [
        f"--cuda-graph-scope full_iteration needs --no-check-for-nan-in-loss-and-grad in "
        f"Megatron {line}"]
    assert messages(version, *flags, "--no-check-for-nan-in-loss-and-grad",
                    plugin="training") == []


def test_fp8_full_iteration_inference_graphs_need_optimized_mxfp8_in_0_17():
    flags = ("--cuda-graph-scope", "full_iteration_inference", "--cuda-graph-impl", "local",
             "--fp8-format", "hybrid")
    assert messages("0.17.1", *flags, plugin="training") == [
        "FP8 with full_iteration_inference CUDA graphs needs --transformer-impl "
        "inference_optimized in Megatron 0.17"]


# -- renamed settings: the line's own setting reaches the rules reading megaplug's --------

@pytest.mark.parametrize("version", ["0.13.1", "0.16.1"])
def test_disabled_gloo_groups_reach_the_checkpoint_rule_in_lines_naming_them_enable(version):
    flags = ("--disable-gloo-process-groups", "--use-distributed-optimizer",
             "--ckpt-format", "torch")
    assert messages(version, *flags, plugin="checkpointing") == [
        "--disable-gloo-process-groups with the distributed optimizer needs a distributed "
        "checkpoint format, not --ckpt-format torch"]
    config = resolve_at(version, "--disable-gloo-process-groups")
    assert config.enable_gloo_process_groups is False
    assert "use_gloo_process_groups" not in config
    assert messages(version, *flags[1:], plugin="checkpointing") == []


@pytest.mark.parametrize("version,renamed", [
    ("0.13.1", {"layernorm_epsilon": ("norm_epsilon", False),
                "layernorm_zero_centered_gamma": ("apply_layernorm_1p", False),
                "use_mamba_mem_eff_path": ("disable_mamba_mem_eff_path", True),
                "use_gloo_process_groups": ("enable_gloo_process_groups", False),
                "disable_msc_deprecated": ("enable_msc", True),
                "inference_max_requests": ("inference_max_batch_size", False)}),
    ("0.16.1", {"use_gloo_process_groups": ("enable_gloo_process_groups", False),
                "metadata_path": ("tokenizer_metadata", False),
                "special_tokens": ("tokenizer_special_tokens", False),
                "fp4_param_gather": ("fp4_param", False),
                "disable_msc_deprecated": ("enable_msc", True),
                "cuda_graph_scope_deprecated": ("cuda_graph_scope", False),
                "inference_max_requests": ("inference_max_batch_size", False),
                "enable_chunked_prefill": ("disable_chunked_prefill", True)}),
    ("0.17.0", {"metadata_path": ("tokenizer_metadata", False),
                "special_tokens": ("tokenizer_special_tokens", False),
                "fp4_param_gather": ("fp4_param", False),
                "disable_msc_deprecated": ("enable_msc", True),
                "cuda_graph_scope_deprecated": ("cuda_graph_scope", False)}),
    ("0.17.1", {"metadata_path": ("tokenizer_metadata", False),
                "special_tokens": ("tokenizer_special_tokens", False),
                "disable_msc_deprecated": ("enable_msc", True),
                "cuda_graph_scope_deprecated": ("cuda_graph_scope", False)}),
    ("0.18.2", {}), ("main", {})])
def test_renamed_settings_are_the_releases_measured_map(version, renamed):
    """The plugins' release data name each release's renamed settings (measured by
    scripts/gen_megatron_releases.py); 0.13's --cuda-graph-scope (one word) is not megaplug's
    list: not a rename. 0.17.1 moved --fp4-param-gather to megaplug's setting."""
    from megaplug import load

    kernel = load([], target=target(version))[0]
    assert kernel.table.renamed == renamed


def test_a_renamed_setting_given_reaches_the_rules_in_its_type():
    from megaplug import Draft, Rules
    from megaplug.testing import stand_in

    seen = {}

    def spy(config: Draft) -> None:
        seen.update(eps=config.layernorm_epsilon, mem=config.use_mamba_mem_eff_path,
                    source=config.source("layernorm_epsilon").source)

    plugins = [stand_in("spy", rules=Rules(validate=(spy,)))]
    config = resolve_at_with(plugins, "0.15.3", "--norm-epsilon", "1e-6",
                             "--disable-mamba-mem-eff-path")
    assert seen == {"eps": 1e-6, "mem": False, "source": "command-line"}
    assert config.norm_epsilon == 1e-6 and "layernorm_epsilon" not in config
    seen.clear()
    resolve_at_with(plugins, "0.15.3")
    assert seen == {"eps": 1e-5, "mem": True, "source": "default"}


def resolve_at_with(plugins, version: str, *flags: str):
    return resolve(*NO_PREFLIGHT, *flags, plugins=plugins, target=target(version))


# -- data: --tiktoken-special-tokens read as --tokenizer-special-tokens (0.16, 0.17) -------

@pytest.mark.parametrize("version,carried", [("0.15.3", False), ("0.16.1", True),
                                             ("0.17.1", True)])
def test_tiktoken_special_tokens_carried_over_in_0_16_and_0_17(version, carried):
    config = resolve_at(version, "--tiktoken-special-tokens", "<a>", "<b>")
    assert config.get("tokenizer_special_tokens") == (["<a>", "<b>"] if carried else None)
    assert config.tiktoken_special_tokens == ["<a>", "<b>"]


# -- precision: FP4 parameter gathers need sharded parameters only in the seed line --------

@pytest.mark.parametrize("version", ["0.15.3", "0.17.1", "0.19.0", "main"])
def test_unsharded_fp4_param_gather_taken_up_to_main(version):
    assert messages(version, "--fp4-format", "e2m1", "--fp4-param-gather",
                    plugin="precision", transformer_engine="2.17.1") == []


def test_unsharded_fp4_param_gather_refused_in_the_seed_line():
    assert messages("seed", "--fp4-format", "e2m1", "--fp4-param-gather",
                    plugin="precision", transformer_engine="2.17.1") == [
        "--fp4-param-gather needs sharded parameters: --use-distributed-optimizer, or a fully "
        "sharded data-parallel implementation"]


@pytest.mark.parametrize("version", ["0.18.2", "0.19.0", "main"])
def test_full_iteration_impl_needs_no_nan_check_from_0_18(version):
    assert messages(version, "--cuda-graph-impl", "full_iteration", plugin="training") == [
        "--cuda-graph-impl full_iteration needs --no-check-for-nan-in-loss-and-grad for training"]
    assert messages(version, "--cuda-graph-impl", "full_iteration",
                    "--no-check-for-nan-in-loss-and-grad", plugin="training") == []
    # the fake process group turns the check off only after Megatron asked for it
    assert messages(version, "--cuda-graph-impl", "full_iteration", "--fake-process-group",
                    plugin="training") == [
        "--cuda-graph-impl full_iteration needs --no-check-for-nan-in-loss-and-grad for training"]


# -- model: interleaved RoPE with fusion (0.13), legacy models' limits (up to 0.17) --------

def test_interleaved_rotary_refused_with_rope_fusion_in_0_13_whatever_the_embedding():
    for flags in ((), ("--position-embedding-type", "rope")):
        assert messages("0.13.1", "--rotary-interleaved", *flags, plugin="model") == [
            "--rotary-interleaved does not work with RoPE fusion in Megatron 0.13"]
    assert messages("0.13.1", "--rotary-interleaved", "--no-rope-fusion", plugin="model") == []
    assert messages("0.14.0", "--rotary-interleaved", plugin="model") == []


@pytest.mark.parametrize("version,line", [("0.13.1", "0.13.1"), ("0.17.1", "0.17.1")])
def test_legacy_models_limits_up_to_0_17(version, line):
    assert messages(version, "--use-legacy-models", plugin="model") == [
        f"legacy models support only --ckpt-format torch (Megatron {line})"]
    legacy = ("--use-legacy-models", "--ckpt-format", "torch")
    assert messages(version, *legacy, plugin="model") == []
    assert messages(version, *legacy, "--decoupled-lr", "0.001", "--rotary-interleaved",
                    "--no-rope-fusion", plugin="model") == [
        f"--decoupled-lr is not supported in legacy models (Megatron {line})",
        f"--rotary-interleaved is not supported in legacy models (Megatron {line})"]
    assert messages(version, "--decoupled-lr", "0.001", "--rotary-interleaved",
                    "--no-rope-fusion", plugin="model") == []


# -- training: batch divisibility is validate_args' from 0.18 on ---------------------------

@pytest.mark.parametrize("version,checked", [("0.13.1", False), ("0.17.1", False),
                                             ("0.18.2", True), ("main", True)])
def test_batch_divisibility_checked_from_0_18(version, checked):
    found = messages(version, "--global-batch-size", "3", "--micro-batch-size", "2",
                     plugin="training")
    assert bool(found) is checked
    if checked:
        assert found[0].startswith("--global-batch-size 3 must be divisible by "
                                   "--micro-batch-size 2")


# -- parallel: Megatron 0.13's encoder stages ----------------------------------------------

def world(size: int) -> dict[str, str]:
    return {"WORLD_SIZE": str(size), "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def parallel_resolve(version: str, size: int, *flags: str):
    return resolve(*NO_PREFLIGHT, "--num-layers", "12", *flags,
                   target=target(version, world(size)), environ=world(size))


def parallel_messages(version: str, size: int, *flags: str) -> list[str]:
    return [p.message for p in problems(*NO_PREFLIGHT, "--num-layers", "12", *flags,
                                        target=target(version, world(size)),
                                        environ=world(size)) if p.plugin == "parallel"]


def test_encoder_stages_add_to_the_model_parallel_group_in_0_13():
    config = parallel_resolve("0.13.1", 12, "--encoder-pipeline-model-parallel-size", "1",
                              "--tensor-model-parallel-size", "2")
    assert config.encoder_tensor_model_parallel_size == 2  # the decoder's, for its stages
    assert config.data_parallel_size == 3  # 12 // (2 x 1 + 2 x 1)
    assert parallel_messages("0.13.1", 8, "--encoder-pipeline-model-parallel-size", "2",
                             "--tensor-model-parallel-size", "2") == [
        "world size 8 is not divisible by the model-parallel size 6 (the encoder's stages and "
        "the decoder's: TP x PP x CP of each, added)"]
    assert parallel_resolve("0.14.0", 12, "--tensor-model-parallel-size", "2") \
        .data_parallel_size == 6


def test_encoder_tensor_parallelism_limits_in_0_13():
    assert parallel_messages("0.13.1", 12, "--encoder-tensor-model-parallel-size", "4",
                             "--tensor-model-parallel-size", "2",
                             "--encoder-pipeline-model-parallel-size", "1") == [
        "--encoder-tensor-model-parallel-size 4 exceeds --tensor-model-parallel-size 2: "
        "encoders with more tensor parallelism than the decoder are not supported"]


def test_pipeline_split_rank_gives_the_encoder_its_stages_in_0_13():
    config = parallel_resolve("0.13.1", 8, "--pipeline-model-parallel-size", "4",
                              "--pipeline-model-parallel-split-rank", "1")
    assert (config.encoder_pipeline_model_parallel_size, config.pipeline_model_parallel_size,
            config.transformer_pipeline_model_parallel_size, config.data_parallel_size) == (
        1, 3, 4, 2)
    assert parallel_messages("0.13.1", 8, "--pipeline-model-parallel-size", "2",
                             "--pipeline-model-parallel-split-rank", "2")[0] == (
        "--pipeline-model-parallel-split-rank 2 leaves the decoder no pipeline stage of "
        "--pipeline-model-parallel-size 2")


# -- data: FIM refuses the legacy tokenizer in 0.16 ----------------------------------------

def test_fim_refuses_the_legacy_tokenizer_in_0_16_only():
    flags = ("--fim-data", "--data-path", "/data/x")
    assert messages("0.16.1", *flags, "--legacy-tokenizer", plugin="data") == [
        "--fim-data is not supported with legacy tokenizers (--legacy-tokenizer)"]
    assert messages("0.16.1", *flags, plugin="data") == []
    assert messages("0.17.1", *flags, plugin="data") == []


# -- parallel: a single virtual stage stays 1 in 0.13 --------------------------------------

@pytest.mark.parametrize("version,kept", [("0.13.1", 1), ("0.14.0", None), ("main", None)])
def test_single_virtual_stage_is_none_from_0_14(version, kept):
    config = parallel_resolve(version, 8, "--pipeline-model-parallel-size", "2",
                              "--num-virtual-stages-per-pipeline-rank", "1")
    assert config.virtual_pipeline_model_parallel_size == kept
    assert config.overlap_p2p_comm is (kept is not None)  # the interleaved schedule's
    assert parallel_resolve(version, 8, "--pipeline-model-parallel-size", "2") \
        .virtual_pipeline_model_parallel_size is None


# -- logging, precision, data: rules of some lines ----------------------------------------

@pytest.mark.parametrize("version", ["0.16.1", "0.19.0", "main"])
def test_memory_log_interval_a_multiple_of_the_log_interval(version):
    assert messages(version, "--log-memory-interval", "3", "--log-interval", "2",
                    plugin="logging") == [
        "--log-memory-interval 3 must be a multiple of --log-interval 2"]
    assert messages(version, "--log-memory-interval", "4", "--log-interval", "2",
                    plugin="logging") == []


@pytest.mark.parametrize("version,checked", [("0.16.1", False), ("0.17.1", True),
                                             ("main", True)])
def test_mxfp8_inference_layers_need_flashinfer_from_0_17(version, checked):
    found = messages(version, "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8",
                     "--transformer-impl", "inference_optimized", plugin="precision",
                     transformer_engine="2.17.1", flashinfer=None)
    assert found == ([
        "--fp8-recipe mxfp8 with --transformer-impl inference_optimized requires flashinfer "
        ">= 0.6.4, not installed"] if checked else [])


@pytest.mark.parametrize("version,refused", [("0.16.1", True), ("0.17.1", True),
                                             ("0.18.2", False)])
def test_phases_refuse_rampup_in_0_16_and_0_17(version, refused):
    found = messages(version, "--phase-transition-iterations", "2,5", "--rampup-batch-size",
                     "4", "4", "100", "--train-samples", "1000", plugin="data")
    line = version  # messages name the exact release in force
    assert found == ([f"multi-phase training (--phase-transition-iterations) does not "
                      f"support --rampup-batch-size in Megatron {line}"] if refused else [])


# -- checkpointing: conversion and checkpoint-argument checks from 0.18 --------------------

@pytest.mark.parametrize("version,checked", [("0.13.1", False), ("0.17.1", False),
                                             ("0.18.2", True), ("main", True)])
def test_conversion_checked_from_0_18(version, checked):
    assert messages(version, "--use-checkpoint-args", plugin="checkpointing") == [
        "--use-checkpoint-args needs --load or --pretrained-checkpoint"]  # asked in every line
    assert bool(messages(version, "--ckpt-convert-format", "torch_dist", "--load", "/l",
                         plugin="checkpointing")) is checked  # no --ckpt-convert-save
    config = resolve_at(version, "--ckpt-convert-format", "torch_dist", "--load", "/l",
                        "--ckpt-convert-save", "/c")
    assert config.exit_on_missing_checkpoint is checked


def test_a_layout_of_one_virtual_stage_is_none_in_0_13():
    config = parallel_resolve("0.13.1", 8, "--pipeline-model-parallel-size", "2",
                              "--pipeline-model-parallel-layout", "Et*6|t*6L")
    assert config.virtual_pipeline_model_parallel_size is None
