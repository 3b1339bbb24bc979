"""Each MoE derivation and check, accepted and rejected."""

from __future__ import annotations

import pytest

import megaplug


# -- derivations ---------------------------------------------------------------------


def test_zero_experts_means_dense(resolve):
    r = resolve("--num-experts", "0")
    assert r.num_experts is None
    assert r.moe_ffn_hidden_size is None


def test_moe_ffn_hidden_size_defaults_to_ffn_hidden_size(resolve):
    r = resolve("--num-experts", "8", "--hidden-size", "32")
    assert r.moe_ffn_hidden_size == 128
    assert r.source("moe_ffn_hidden_size").plugin == "moe"
    assert any("--moe-ffn-hidden-size" in w.message for w in r.warnings)


def test_explicit_moe_ffn_hidden_size_is_kept(resolve):
    assert resolve("--num-experts", "8", "--moe-ffn-hidden-size", "48").moe_ffn_hidden_size == 48


def test_expert_tensor_parallel_size_defaults_to_tensor_parallel_size(resolve):
    assert resolve("--tensor-model-parallel-size", "4").expert_tensor_parallel_size == 4
    r = resolve("--tensor-model-parallel-size", "4", "--expert-tensor-parallel-size", "1")
    assert r.expert_tensor_parallel_size == 1


def test_single_router_values_are_unwrapped(resolve):
    r = resolve("--moe-router-load-balancing-type", "sinkhorn", "--moe-aux-loss-coeff", "0.01")
    assert r.moe_router_load_balancing_type == "sinkhorn"
    assert r.moe_aux_loss_coeff == 0.01


def test_upcycling_skips_optimizer_and_rng(resolve):
    r = resolve("--num-experts", "4", "--moe-use-upcycling", "--save", "/ckpt")
    assert r.no_load_optim is True and r.no_load_rng is True


def test_upcycling_needs_save(problems):
    assert any("--save" in m for m in problems("--num-experts", "4", "--moe-use-upcycling"))


# -- expert parallelism --------------------------------------------------------------


def test_experts_divisible_by_expert_parallel_size(problems):
    assert problems("--num-experts", "8", "--expert-model-parallel-size", "4") == []
    messages = problems("--num-experts", "6", "--expert-model-parallel-size", "4")
    assert messages == ["--num-experts 6 is not a multiple of --expert-model-parallel-size 4"]


def test_divisibility_hint_lists_divisors(resolve):
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--num-experts", "6", "--expert-model-parallel-size", "4")
    (problem,) = [p for p in info.value.problems if p.plugin == "moe"]
    assert "1, 2, 3 or 6" in problem.hint


def test_expert_parallel_needs_experts(problems):
    assert any("--num-experts" in m
               for m in problems("--expert-model-parallel-size", "2"))
    assert any("--num-experts" in m
               for m in problems("--num-experts", "0", "--expert-model-parallel-size", "2"))


# -- kernels -------------------------------------------------------------------------


def test_grouped_gemm_needs_compute_capability_8(problems, resolve):
    assert problems("--num-experts", "4", "--moe-grouped-gemm", capability=(8, 0)) == []
    messages = problems("--num-experts", "4", "--moe-grouped-gemm", capability=(7, 5))
    assert messages and "compute capability 8.0" in messages[0] and "7.5" in messages[0]


def test_grouped_gemm_without_gpu_warns(resolve):
    r = resolve("--num-experts", "4", "--moe-grouped-gemm", capability=None)
    assert any("--moe-grouped-gemm" in w.message for w in r.warnings)


def test_capability_is_not_asked_without_grouped_gemm(kernel):
    class Refusing(megaplug.TargetEnvironment):
        def capability(self):  # type: ignore[override]
            raise AssertionError("capability asked without --moe-grouped-gemm")

    kernel.resolve(["--num-experts", "4"], environ={}, target=Refusing())


# -- latent projections, shortcut connections, megakernel ------------------------------


def test_latent_size(problems):
    assert problems("--num-experts", "4", "--moe-latent-size", "16") == []
    assert any("greater than 0" in m for m in problems("--num-experts", "4",
                                                       "--moe-latent-size", "0"))
    assert any("only applies to MoE" in m for m in problems("--moe-latent-size", "16"))




def test_norm_before_up_proj_needs_latent(problems):
    assert problems("--num-experts", "4", "--moe-latent-size", "8",
                    "--moe-use-norm-before-up-proj") == []
    assert problems("--num-experts", "4", "--moe-use-norm-before-up-proj") == [
        "--moe-use-norm-before-up-proj needs --moe-latent-size"]


def test_shortcut_connection_not_with_fsdp(problems):
    assert problems("--num-experts", "4", "--moe-shortcut-connection") == []
    assert any("--use-megatron-fsdp" in m for m in problems(
        "--num-experts", "4", "--moe-shortcut-connection", "--use-megatron-fsdp"))


def test_shortcut_connection_cuda_graphs(problems):
    base = ("--num-experts", "4", "--moe-shortcut-connection")
    assert problems(*base, "--cuda-graph-impl", "local",
                    "--inference-cuda-graph-scope", "block") == []
    assert any("--cuda-graph-impl" in m for m in problems(*base, "--cuda-graph-impl", "local"))
    assert any("--cuda-graph-impl" in m
               for m in problems(*base, "--cuda-graph-impl", "transformer_engine"))


def test_megakernel_backend_not_with_fsdp(problems):
    assert problems("--moe-megakernel-backend", "mok") == []
    assert any("'mok'" in m for m in problems("--moe-megakernel-backend", "mok",
                                              "--use-torch-fsdp2"))
