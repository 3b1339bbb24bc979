"""The moe flags parse like Megatron's: types, defaults, choices, nargs, patterns."""

from __future__ import annotations

import pytest

import megaplug
from megaplug_moe.options import MoeOptions, moe_freq_type


def test_defaults_match_megatron(resolve):
    r = resolve()
    assert r.num_experts is None
    assert r.moe_layer_freq == 1
    assert r.moe_router_topk == 2
    assert r.moe_router_load_balancing_type == "aux_loss"
    assert r.moe_aux_loss_coeff == 0.0
    assert r.moe_token_dispatcher_type == "allgather"
    assert r.moe_flex_dispatcher_backend == "deepep"
    assert r.moe_hybridep_num_sms_preprocessing == 108
    assert r.moe_paged_stash_buffer_size_factor_cuda == 1.1
    assert r.moe_router_qb_num_bins == 1000
    assert r.moe_router_quantile_balancing_estimation_scope == "micro_batch"
    assert r.moe_megakernel_backend_config is None
    assert r.expert_model_parallel_size == 1


def test_layer_freq_integer_and_pattern(resolve):
    assert resolve("--moe-layer-freq", "2").moe_layer_freq == 2
    assert resolve("--moe-layer-freq", "([1]*3+[0]*1)*2").moe_layer_freq == [1, 1, 1, 0] * 2
    assert resolve("--moe-layer-freq", "[0]+[1]*3").moe_layer_freq == [0, 1, 1, 1]


@pytest.mark.parametrize("text", ["abc", "2*3", "[1]*", "__import__('os')"])
def test_layer_freq_rejects_non_patterns(resolve, text):
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--moe-layer-freq", text)
    assert any("--moe-layer-freq" in p.message for p in info.value.problems)


def test_layer_freq_pattern_rejects_zero_padded_numbers(resolve):
    # Megatron evaluates the pattern with Python, where 01 is a syntax error (00 is not).
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--moe-layer-freq", "[01]*4")
    assert any("'01'" in p.message for p in info.value.problems)
    assert resolve("--moe-layer-freq", "[1]*00+[0,10]").moe_layer_freq == [0, 10]
    assert resolve("--moe-layer-freq", "01").moe_layer_freq == 1  # int('01') outside a list


def test_freq_type_accepts_ints_from_config_files():
    assert moe_freq_type(4) == 4
    assert moe_freq_type([1, 0]) == [1, 0]


def test_router_lists_keep_several_values(resolve):
    r = resolve("--moe-router-load-balancing-type", "seq_aux_loss", "sinkhorn",
                "--moe-aux-loss-coeff", "1e-2", "1e-3")
    assert r.moe_router_load_balancing_type == ["seq_aux_loss", "sinkhorn"]
    assert r.moe_aux_loss_coeff == [0.01, 0.001]


def test_router_dtype_choices(resolve):
    assert resolve("--moe-router-dtype", "fp32").moe_router_dtype == "fp32"
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--moe-router-dtype", "auto2")
    assert any("--moe-router-dtype" in p.message for p in info.value.problems)


def test_megakernel_config_is_json(resolve):
    r = resolve("--moe-megakernel-backend-config", '{"num_sms": 16}')
    assert r.moe_megakernel_backend_config == {"num_sms": 16}
    with pytest.raises(megaplug.ConfigError) as info:
        resolve("--moe-megakernel-backend-config", "{oops")
    assert any("not valid JSON" in p.message for p in info.value.problems)


def test_every_field_has_help():
    from megaplug._options import specs_from_options

    specs = specs_from_options(MoeOptions, "moe")
    assert len(specs) > 70
    assert [spec.dest for spec in specs if not spec.help] == []
