"""The estimator's parts on small hand-counted configurations."""

from __future__ import annotations


from megaplug_memory.estimator import (GIB, Job, estimate, in_flight, layer_activations,
                                       stage_parameters)

BASE = {"world_size": 8, "num_layers": 4, "hidden_size": 64, "ffn_hidden_size": 256,
        "num_attention_heads": 4, "seq_length": 128, "micro_batch_size": 2,
        "global_batch_size": 16, "vocab_size": 1000, "make_vocab_size_divisible_by": 128,
        "bf16": True, "transformer_impl": "local", "add_bias_linear": False,
        "normalization": "RMSNorm", "position_embedding_type": "rope",
        "untie_embeddings_and_output_weights": True, "data_parallel_size": 8}


def test_dense_parameters_are_counted_per_stage_with_embeddings_on_the_ends():
    job = Job(BASE)
    # per layer: 2 RMSNorms 2x64, QKV 64x192, proj 64x64, MLP 64x256 + 256x64
    layer = 2 * 64 + 64 * 192 + 64 * 64 + 2 * 64 * 256
    embedding = 1024 * 64  # 1000 padded to a multiple of 128
    assert stage_parameters(job, 0) == (4 * layer + embedding + 64 + embedding, 0)
    two_stages = Job({**BASE, "pipeline_model_parallel_size": 2, "data_parallel_size": 4})
    assert stage_parameters(two_stages, 0) == (2 * layer + embedding, 0)
    assert stage_parameters(two_stages, 1) == (2 * layer + 64 + embedding, 0)


def test_a_tied_output_layer_is_a_second_copy_only_on_another_stage():
    tied = {**BASE, "untie_embeddings_and_output_weights": False}
    one = stage_parameters(Job(tied), 0)[0]
    untied = stage_parameters(Job(BASE), 0)[0]
    assert untied - one == 1024 * 64
    split = Job({**tied, "pipeline_model_parallel_size": 2, "data_parallel_size": 4})
    assert stage_parameters(split, 1)[0] - stage_parameters(split, 0)[0] == 64


def test_experts_are_sharded_by_expert_parallelism_and_the_optimizer_by_expert_dp():
    moe = {**BASE, "num_experts": 8, "moe_ffn_hidden_size": 128, "moe_router_topk": 2,
           "expert_model_parallel_size": 4, "use_distributed_optimizer": True}
    dense, expert = stage_parameters(Job(moe), 0)
    assert expert == 4 * 2 * (2 * 64 * 128)  # 4 layers x 2 local experts x (fc1 + fc2)
    parts = estimate(moe)[0].parts
    # fp32 main parameters + two moments: 12 bytes, over dp 8 (dense) and expert dp 2
    assert parts["optimizer"] == dense * 12 // 8 + expert * 12 // 2
    assert parts["gradients"] == (dense + expert) * 4 and parts["weights"] == (dense + expert) * 2


def test_without_the_distributed_optimizer_every_rank_keeps_all_states():
    parts = estimate(BASE)[0].parts
    params = parts["weights"] // 2
    assert parts["optimizer"] == 12 * params


def test_selective_recompute_drops_the_local_attention_scores():
    job = Job(BASE)
    selective = Job({**BASE, "recompute_granularity": "selective"})
    probabilities = 2 * 2 * 4 * 128 * 128  # bf16, micro-batch 2, 4 heads, s x s
    dropped = layer_activations(job, 0) - layer_activations(selective, 0)
    assert dropped >= probabilities


def test_full_recompute_keeps_only_layer_inputs():
    full = {**BASE, "recompute_granularity": "full", "recompute_method": "uniform",
            "recompute_num_layers": 1}
    assert estimate(full)[0].parts["activations"] == 4 * 2 * 128 * 2 * 64


def test_micro_batches_in_flight_follow_1f1b_and_the_interleaved_schedule():
    pipelined = Job({**BASE, "pipeline_model_parallel_size": 4, "data_parallel_size": 2,
                     "global_batch_size": 32})  # 8 micro-batches
    assert [in_flight(pipelined, stage) for stage in range(4)] == [4, 3, 2, 1]
    interleaved = Job({**BASE, "pipeline_model_parallel_size": 4, "data_parallel_size": 2,
                       "global_batch_size": 32, "virtual_pipeline_model_parallel_size": 2})
    # Megatron's warm-up: (pp - stage - 1) * 2 + (vpp - 1) * pp, plus the one in flight,
    # chunks of half a stage
    assert in_flight(interleaved, 0) == (3 * 2 + 4 + 1) / 2
    few = Job({**BASE, "pipeline_model_parallel_size": 4, "data_parallel_size": 2,
               "global_batch_size": 4})
    assert in_flight(few, 0) == 1  # one micro-batch per data-parallel rank


def test_one_estimate_per_stage_and_rank_picks_its_stage():
    values = {**BASE, "pipeline_model_parallel_size": 2, "data_parallel_size": 4}
    stages = estimate(values)
    assert [(e.rank, e.stage) for e in stages] == [(0, 0), (4, 1)]
    assert estimate(values, rank=5)[0].stage == 1


def test_estimating_a_large_job_gives_every_stage():
    # its time (under 50 ms) is benchmarks/run.py's section 12, not a timed unit test
    values = {**BASE, "world_size": 4096, "num_layers": 128, "pipeline_model_parallel_size": 16,
              "data_parallel_size": 256, "global_batch_size": 4096}
    peaks = [e.peak for e in estimate(values)]
    assert len(peaks) == 16 and all(0 < peak < 10 * GIB for peak in peaks)


# -- what the estimate cannot know, and what it assumes ------------------------------------

def test_without_a_vocabulary_the_figure_is_a_lower_bound_and_no_fit_is_claimed():
    from megaplug_memory.estimator import verdict

    tokenizer_defined = {key: value for key, value in BASE.items() if key != "vocab_size"}
    job = Job(tokenizer_defined)
    assert [unknown.lower_bound for unknown in job.unknowns] == [True]
    assert "the vocabulary size" in job.unknowns[0].words
    rank = estimate(tokenizer_defined)[0]
    assert verdict(job, rank, 80 * 10**9) is None  # small, but the logits are not counted
    assert verdict(job, rank, rank.needed // 2) is False  # the lower bound is already over
    assert verdict(Job(BASE), estimate(BASE)[0], 80 * 10**9) is True


def test_fsdp_is_not_modelled_so_no_verdict_either_way():
    from megaplug_memory.estimator import verdict

    for flag in ("use_megatron_fsdp", "use_torch_fsdp2"):
        job = Job({**BASE, flag: True})
        assert [unknown.lower_bound for unknown in job.unknowns] == [False]
        rank = estimate({**BASE, flag: True})[0]
        assert verdict(job, rank, 1) is None  # over any device, yet not refused


def test_a_pipeline_layout_places_layers_embedding_and_loss_as_written():
    layout = {**BASE, "num_layers": 6, "pipeline_model_parallel_size": 2,
              "data_parallel_size": 4, "pipeline_model_parallel_layout": "Et|tttttL"}
    job = Job(layout)
    assert job.stage_layers(0) == [0] and job.stage_layers(1) == [1, 2, 3, 4, 5]
    even = Job({key: value for key, value in layout.items()
                if key != "pipeline_model_parallel_layout"})
    assert even.stage_layers(0) == [0, 1, 2]
    assert stage_parameters(job, 1)[0] > stage_parameters(even, 1)[0]
    # the loss alone on a stage of its own: the output layer (and the logits) move there
    tail = Job({**layout, "pipeline_model_parallel_layout": "Ettt|tttL"})
    loss_alone = Job({**layout, "pipeline_model_parallel_layout": "Etttttt|L"})
    assert loss_alone.stage_layers(1) == []
    assert stage_parameters(loss_alone, 1)[0] == 1024 * 64 + 64
    assert stage_parameters(tail, 1)[0] > stage_parameters(loss_alone, 1)[0]


def test_an_interleaved_layout_gives_each_rank_its_virtual_stages():
    job = Job({**BASE, "num_layers": 8, "pipeline_model_parallel_size": 2,
               "virtual_pipeline_model_parallel_size": 2, "data_parallel_size": 4,
               "pipeline_model_parallel_layout": "Et|ttt|ttt|tL"})
    assert job.stage_chunks(0) == [[0], [4, 5, 6]] and job.stage_chunks(1) == [[1, 2, 3], [7]]


def test_block_recompute_counts_its_layers_per_model_chunk():
    """Megatron recomputes the first N layers of each virtual stage's block: with two
    chunks of four layers and N = 2, four of the stage's eight layers."""
    interleaved = {**BASE, "num_layers": 16, "pipeline_model_parallel_size": 2,
                   "virtual_pipeline_model_parallel_size": 2, "data_parallel_size": 4,
                   "global_batch_size": 64, "recompute_granularity": "full",
                   "recompute_method": "block", "recompute_num_layers": 2}
    job = Job(interleaved)
    assert job.stage_chunks(0) == [[0, 1, 2, 3], [8, 9, 10, 11]]
    from megaplug_memory.estimator import activation_parts, layer_input

    kept, _ = activation_parts(job, 0)
    per_layer = layer_activations(job, 0)
    expected = (4 * layer_input(job) + 4 * per_layer) * in_flight(job, 0)
    assert kept == int(expected)


def test_sizes_beyond_any_gpu_are_named_not_overflowed():
    huge = {**BASE, "hidden_size": 10**160}
    assert Job(huge).too_large()[:1] == ["hidden_size=about 10**160"]
    assert Job(BASE).too_large() == []


def test_the_moe_bound_is_the_capacity_factor_or_the_assumed_imbalance_within_the_most():
    from megaplug_memory.estimator import Assumptions

    moe = {**BASE, "num_experts": 8, "moe_ffn_hidden_size": 128, "moe_router_topk": 2,
           "expert_model_parallel_size": 4}
    assert Job(moe).moe_bound_factor() == 2.0
    assert Job(moe, Assumptions(moe_imbalance=3.0)).moe_bound_factor() == 3.0
    # every token's two choices on this rank's two experts: 4 ranks x 2 / 2 = 4x at most
    assert Job(moe, Assumptions(moe_imbalance=100.0)).moe_bound_factor() == 4.0
    assert Job({**moe, "moe_expert_capacity_factor": 1.25}).moe_bound_factor() == 1.25
    assert Job(BASE).moe_bound_factor() == 1.0
    balanced, bound = estimate(moe)[0], estimate(moe, assumptions=Assumptions(3.0))[0]
    assert balanced.peak == bound.peak and bound.bound > balanced.bound > balanced.peak


def test_the_allocator_conf_is_read_as_torch_reads_it():
    from megaplug_memory.estimator import expandable

    assert expandable("expandable_segments:True") is True
    assert expandable("max_split_size_mb:128,expandable_segments:True") is True
    assert expandable("expandable_segments:True,expandable_segments:False") is False
    assert expandable(None) is False and expandable("") is False
