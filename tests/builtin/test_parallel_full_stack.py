"""The parallel, precision and experimental plugins together with every installed plugin."""

from __future__ import annotations

import pytest

import megaplug

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4"]
ENV = {"WORLD_SIZE": "8", "RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
TARGET = dict(packages={"transformer_engine": "2.17.1"}, device_capability=(9, 0))


def _resolve(argv, env=ENV):
    kernel, _ = megaplug.load([])
    return kernel.resolve([*BASE, *argv], environ=env,
                          target=megaplug.TargetEnvironment(environ=env, **TARGET))


def _problems(argv, env=ENV):
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(argv, env)
    return info.value.problems


def test_minimal_launch_resolves_the_megatron_values():
    resolved = _resolve([])
    assert (resolved.world_size, resolved.rank, resolved.data_parallel_size) == (8, 0, 8)
    assert resolved.transformer_pipeline_model_parallel_size == 1
    assert resolved.virtual_pipeline_model_parallel_size is None
    assert str(resolved.params_dtype) == "torch.float32"
    assert "model_parallel_size" not in resolved


def test_bf16_with_tensor_and_pipeline_parallelism():
    resolved = _resolve(["--bf16", "--tensor-model-parallel-size", "2",
                         "--pipeline-model-parallel-size", "2", "--sequence-parallel"])
    assert resolved.data_parallel_size == 2
    assert str(resolved.params_dtype) == "torch.bfloat16"
    assert resolved.accumulate_allreduce_grads_in_fp32 is True
    assert resolved.sequence_parallel is True


def test_world_size_not_divisible_is_reported_by_parallel():
    found = _problems(["--tensor-model-parallel-size", "3"])
    assert any(p.plugin == "parallel" and p.message.startswith("world size 8 is not divisible by "
                                                                "the model-parallel size 3")
               for p in found)


def test_hybrid_pattern_drives_layers_for_the_model_plugin():
    resolved = _resolve(["--hybrid-layer-pattern", "M-M*|M-M*", "--pipeline-model-parallel-size",
                         "2", "--spec", "megatron.core.models.hybrid.hybrid_layer_specs",
                         "hybrid_stack_spec"])
    assert resolved.num_layers == 8
    assert resolved.get("encoder_num_layers") in (None, 8)
    assert resolved.virtual_pipeline_model_parallel_size is None
    assert resolved.data_parallel_size == 4


def test_megatron_facade_gives_real_dtypes():
    torch = pytest.importorskip("torch")
    from megaplug.megatron import parse_and_validate_args

    args = parse_and_validate_args(argv=[*BASE, "--bf16"], environ=ENV,
                                   target=megaplug.TargetEnvironment(environ=ENV, **TARGET))
    assert args.params_dtype is torch.bfloat16
    assert args.main_grads_dtype is torch.float32
    assert not hasattr(args, "model_parallel_size")


FROZEN = ["--freeze-all-layers", "--bf16"]


def test_frozen_training_still_checks_overlap_param_gather_as_given():
    # Megatron checks --overlap-param-gather before --freeze-all-layers turns it off
    found = _problems([*FROZEN, "--overlap-param-gather", "--overlap-grad-reduce"])
    assert any(p.plugin == "parallel" and "--overlap-param-gather needs sharded" in p.message
               for p in found)
    found = _problems([*FROZEN, "--overlap-param-gather", "--use-distributed-optimizer"])
    assert any(p.plugin == "parallel" and "needs --overlap-grad-reduce" in p.message
               for p in found)


def test_frozen_training_accepts_what_the_distributed_optimizer_allowed():
    # validate_args' acceptance; Megatron's DDP then refuses two optimizer instances without
    # the distributed optimizer it turned off (pre-flight's first-step rule says so)
    resolved = _resolve([*FROZEN, "--use-distributed-optimizer", "--overlap-grad-reduce",
                         "--overlap-param-gather", "--fp8-format", "hybrid",
                         "--fp8-param-gather", "--num-distributed-optimizer-instances", "2"],
                        env={**ENV, "MEGAPLUG_PREFLIGHT": "0"})
    assert resolved.use_distributed_optimizer is False
    assert resolved.overlap_param_gather is False
    assert resolved.fp8_param_gather is True


def test_fp8_param_gather_without_sharding_is_still_rejected_when_frozen():
    found = _problems([*FROZEN, "--fp8-format", "hybrid", "--fp8-param-gather"])
    assert any(p.plugin == "precision" and "--fp8-param-gather needs sharded" in p.message
               for p in found)


def test_emerging_optimizer_checks_see_the_distributed_optimizer_as_given():
    # Megatron checks overlapped gathers and fp8 gathers before an emerging optimizer swaps
    # the distributed optimizer for its layer-wise one.
    resolved = _resolve(["--optimizer", "muon", "--use-distributed-optimizer",
                         "--overlap-grad-reduce", "--overlap-param-gather", "--bf16",
                         "--fp8-format", "e4m3", "--fp8-param-gather"])
    assert resolved.use_distributed_optimizer is False
    assert resolved.use_layer_wise_distributed_optimizer is True
    assert resolved.overlap_param_gather is True
    found = _problems(["--optimizer", "muon", "--overlap-grad-reduce", "--overlap-param-gather"])
    assert any(p.plugin == "parallel" and "--overlap-param-gather needs sharded" in p.message
               for p in found)
