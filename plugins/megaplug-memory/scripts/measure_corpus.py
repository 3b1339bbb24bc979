"""Measure the peak GPU memory of one rank of Megatron-LM's pretrain_gpt.py, config by config.

Runs on a GPU machine with torch and a Megatron-LM source tree (no Transformer Engine, no Apex):

    python3 measure_corpus.py --megatron PATH --batch A --out DIR [--budget SECONDS]

Each configuration is one rank (WORLD_SIZE / RANK set) of a larger job simulated with
Megatron's --fake-process-group, --transformer-impl local and mock data, trained 4 iterations,
one process at a time (concurrent runs would share the GPU's memory). For each it appends one
JSON line to DIR/corpus-BATCH.jsonl: the configuration (world size, rank, argv), the peak
torch.cuda.max_memory_allocated() after each iteration, the memory still allocated after the
last one (weights, gradients and optimizer states), whether it ran out of memory, and Megatron's
own estimate (report_theoretical_memory) in bytes. Logs' last lines go to DIR/logs-BATCH.txt.

The fake process group moves no data: a collective leaves its output as torch.empty left it.
For MoE that matters (routing maps and token counts gathered from the other ranks would be
garbage, and buffer sizes follow them), so the child fills collectives' outputs with this rank's
own input, as if every rank had routed the same tokens: a balanced, symmetric job.

`python3 measure_corpus.py --list` prints the configurations (no GPU needed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ITERATIONS = 4

COMMON = [
    "--bf16", "--transformer-impl", "local", "--no-gradient-accumulation-fusion",
    "--no-masked-softmax-fusion", "--no-persist-layer-norm", "--mock-data",
    "--tokenizer-type", "NullTokenizer", "--train-iters", str(ITERATIONS), "--eval-iters", "0",
    "--eval-interval", "100000", "--log-interval", "1", "--lr", "1e-4", "--min-lr", "1e-5",
    "--fake-process-group", "--seed", "1234", "--no-load-optim", "--no-load-rng",
]

LLAMA = ["--hidden-size", "4096", "--ffn-hidden-size", "14336", "--num-attention-heads", "32",
         "--group-query-attention", "--num-query-groups", "8", "--swiglu",
         "--normalization", "RMSNorm", "--position-embedding-type", "rope",
         "--untie-embeddings-and-output-weights", "--disable-bias-linear",
         "--attention-dropout", "0", "--hidden-dropout", "0", "--no-rope-fusion"]
MODELS = {
    # Llama-3-8B-like: GQA 32/8, SwiGLU, RMSNorm, untied, 128k vocabulary, no dropout.
    "llama8b": LLAMA + ["--vocab-size", "128256"],
    # GPT-2-XL-like: multi-head attention, GeLU, LayerNorm, tied, learned positions, dropout 0.1.
    "gpt2k": ["--hidden-size", "2048", "--num-attention-heads", "16", "--vocab-size", "50257"],
    # Mixtral-like: Llama attention, 8 experts of 14336, top-2.
    "mixtral": LLAMA + ["--vocab-size", "32000", "--num-experts", "8", "--moe-router-topk", "2"],
    # DeepSeek-V2-Lite-like without MLA: 64 fine-grained experts, top-6, a shared expert.
    "dsmoe": ["--hidden-size", "2048", "--ffn-hidden-size", "10944", "--num-attention-heads", "16",
              "--swiglu", "--normalization", "RMSNorm", "--position-embedding-type", "rope",
              "--untie-embeddings-and-output-weights", "--disable-bias-linear",
              "--attention-dropout", "0", "--hidden-dropout", "0", "--no-rope-fusion",
              "--vocab-size", "102400",
              "--num-experts", "64", "--moe-ffn-hidden-size", "1408",
              "--moe-shared-expert-intermediate-size", "2816", "--moe-router-topk", "6"],
}


def config(name, model, layers, world, rank, seq, mbs, microbatches=2, tp=1, pp=1, extra=()):
    """One measured point: a rank of a world-size job; global batch = mbs x dp x microbatches."""
    extra = list(extra)
    flag = "--context-parallel-size"
    cp = int(extra[extra.index(flag) + 1]) if flag in extra else 1
    dp = world // (tp * pp * cp)
    argv = (MODELS[model] + ["--num-layers", str(layers), "--seq-length", str(seq),
            "--max-position-embeddings", str(seq), "--micro-batch-size", str(mbs),
            "--global-batch-size", str(mbs * dp * microbatches),
            "--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp)]
            + extra)
    return {"name": name, "model": model, "world_size": world, "rank": rank, "argv": argv}


# --transformer-impl local refuses sequence parallelism (torch norms): SP is modelled, not measured.
SP: list[str] = []
DO = ["--use-distributed-optimizer"]
FULL = ["--recompute-granularity", "full", "--recompute-method", "uniform",
        "--recompute-num-layers", "1"]
SEL = ["--recompute-granularity", "selective"]
A2A = ["--moe-token-dispatcher-type", "alltoall"]
AG = ["--moe-token-dispatcher-type", "allgather"]

BATCHES = {
    "A": [
        config("llama8b-l8-dp8-s2k-m1", "llama8b", 8, 8, 0, 2048, 1, extra=DO),
        config("llama8b-l8-dp8-s4k-m4", "llama8b", 8, 8, 0, 4096, 4, extra=DO),
        config("llama8b-l32-tp4pp4-s4k-first", "llama8b", 32, 32, 0, 4096, 1, 8, tp=4, pp=4,
               extra=SP + DO),
        config("llama8b-l32-tp4pp4-s4k-last", "llama8b", 32, 32, 31, 4096, 1, 8, tp=4, pp=4,
               extra=SP + DO),
        config("llama8b-l32-tp4pp4vpp2-s4k-first", "llama8b", 32, 32, 0, 4096, 1, 8, tp=4, pp=4,
               extra=SP + DO + ["--num-layers-per-virtual-pipeline-stage", "4"]),
        config("llama8b-l16-tp2-s8k-m2-full", "llama8b", 16, 8, 0, 8192, 2, tp=2,
               extra=SP + DO + FULL),
        config("llama8b-l16-tp2-s8k-m2-selective", "llama8b", 16, 8, 0, 8192, 2, tp=2,
               extra=SP + DO + SEL),
        config("llama8b-l16-tp2pp2-s4k-m2-block", "llama8b", 16, 16, 0, 4096, 2, 4, tp=2, pp=2,
               extra=SP + DO + ["--recompute-granularity", "full", "--recompute-method", "block",
                                "--recompute-num-layers", "4"]),
        config("llama8b-l16-tp2-s2k-m2-nodistopt", "llama8b", 16, 16, 0, 2048, 2, tp=2, extra=SP),
        config("gpt2k-l24-dp8-s2k-m8", "gpt2k", 24, 8, 0, 2048, 8),
        config("gpt2k-l24-dp8-s4k-m2", "gpt2k", 24, 8, 0, 4096, 2, extra=DO),
        config("mixtral-l8-ep8-s4k-m1-a2a", "mixtral", 8, 8, 0, 4096, 1,
               extra=DO + A2A + ["--expert-model-parallel-size", "8"]),
        config("mixtral-l32-pp4ep8-s4k-first", "mixtral", 32, 32, 0, 4096, 1, 8, pp=4,
               extra=DO + A2A + ["--expert-model-parallel-size", "8"]),
        config("dsmoe-l16-pp2ep8-s4k-m2-ag-first", "dsmoe", 16, 16, 0, 4096, 2, 4, pp=2,
               extra=AG + ["--expert-model-parallel-size", "8"]),
        config("dsmoe-l16-pp2ep8-s4k-m2-ag-last", "dsmoe", 16, 16, 15, 4096, 2, 4, pp=2,
               extra=AG + ["--expert-model-parallel-size", "8"]),
        config("llama8b-l16-dp8-s8k-m4-oom", "llama8b", 16, 8, 0, 8192, 4, extra=DO),
        config("gpt2k-l24-dp8-s4k-m8-oom", "gpt2k", 24, 8, 0, 4096, 8, extra=DO),
        config("dsmoe-l8-ep8-s2k-m4-a2a-selective", "dsmoe", 8, 8, 0, 2048, 4,
               extra=DO + A2A + SEL + ["--expert-model-parallel-size", "8"]),
    ],
    "B": [
        config("llama8b-l8-dp8-s2k-m1-nodistopt", "llama8b", 8, 8, 0, 2048, 1),
        config("llama8b-l32-pp8-s2k-m1-first", "llama8b", 32, 8, 0, 2048, 1, 16, pp=8, extra=DO),
        config("llama8b-l32-pp8-s2k-m1-mid", "llama8b", 32, 8, 3, 2048, 1, 16, pp=8, extra=DO),
        config("llama8b-l32-pp8-s2k-m1-last", "llama8b", 32, 8, 7, 2048, 1, 16, pp=8, extra=DO),
        config("llama8b-l32-tp8pp2-s8k-m1-full-first", "llama8b", 32, 32, 0, 8192, 1, 4, tp=8, pp=2,
               extra=SP + DO + FULL),
        config("llama8b-l16-tp4-s8k-m8", "llama8b", 16, 8, 0, 8192, 8, tp=4, extra=SP + DO),
        config("llama8b-l16-tp4-s8k-m4-selective", "llama8b", 16, 8, 0, 8192, 4, tp=4,
               extra=SP + DO + SEL),
        config("llama8b-l32-pp4vpp4-s2k-m2-first", "llama8b", 32, 8, 0, 2048, 2, 8, pp=4,
               extra=DO + ["--num-layers-per-virtual-pipeline-stage", "2"]),
        config("gpt2k-l24-dp8-s2k-m4-selective", "gpt2k", 24, 8, 0, 2048, 4, extra=SEL),
        config("gpt2k-l24-tp2-s2k-m8-nosp", "gpt2k", 24, 8, 0, 2048, 8, tp=2),
        config("gpt2k-l48-pp2-s4k-m1-last", "gpt2k", 48, 8, 7, 4096, 1, 4, pp=2, extra=DO),
        config("mixtral-l8-ep4-s2k-m2-ag", "mixtral", 8, 8, 0, 2048, 2,
               extra=DO + AG + ["--expert-model-parallel-size", "4"]),
        config("mixtral-l16-ep2-s4k-m2-full", "mixtral", 16, 8, 0, 4096, 2,
               extra=DO + A2A + FULL + ["--expert-model-parallel-size", "2"]),
        config("dsmoe-l8-ep8-s8k-m2-a2a", "dsmoe", 8, 8, 0, 8192, 2,
               extra=DO + A2A + ["--expert-model-parallel-size", "8"]),
        config("dsmoe-l8-ep4-s4k-m1-top2", "dsmoe", 8, 8, 0, 4096, 1,
               extra=DO + A2A + ["--expert-model-parallel-size", "4", "--moe-router-topk", "2"]),
        config("llama8b-l32-dp8-s4k-m2-oom", "llama8b", 32, 8, 0, 4096, 2),
        config("mixtral-l16-ep8-s8k-m2-oom", "mixtral", 16, 8, 0, 8192, 2,
               extra=DO + A2A + ["--expert-model-parallel-size", "8"]),
    ],
}

# Batch C was measured after the estimator's constants were fitted on A and B: unseen points.
BATCHES["C"] = [c for c in BATCHES["B"] if c["name"] in (
    "mixtral-l16-ep2-s4k-m2-full", "dsmoe-l8-ep8-s8k-m2-a2a", "dsmoe-l8-ep4-s4k-m1-top2",
    "llama8b-l32-dp8-s4k-m2-oom", "mixtral-l16-ep8-s8k-m2-oom")] + [
    config("llama8b-l8-dp8-s8k-m1", "llama8b", 8, 8, 0, 8192, 1, extra=DO),
    config("gpt2k-l24-dp8-s8k-m1-selective", "gpt2k", 24, 8, 0, 8192, 1, extra=DO + SEL),
    config("mixtral-l8-ep8-s2k-m4-a2a", "mixtral", 8, 8, 0, 2048, 4,
           extra=DO + A2A + ["--expert-model-parallel-size", "8"]),
    config("llama8b-l16-tp2pp2-s2k-m4-last", "llama8b", 16, 16, 15, 2048, 4, 4, tp=2, pp=2,
           extra=DO),
    config("gpt2k-l24-tp4-s8k-m1", "gpt2k", 24, 8, 0, 8192, 1, tp=4, extra=DO),
    config("llama8b-l24-pp2-s4k-m2-block-first", "llama8b", 24, 16, 0, 4096, 2, 4, pp=2,
           extra=DO + ["--recompute-granularity", "full", "--recompute-method", "block",
                       "--recompute-num-layers", "6"]),
]

# The first run of batch A had sequence parallelism in these (refused by the local path):
# rerun in B.
BATCHES["B"] = [c for c in BATCHES["A"] if "-tp" in c["name"]] + BATCHES["B"]

# Batch D, measured with the in-place stand-in collectives (see tile() below), after the
# estimator was last changed: the two points the old stand-in's temporary could have touched,
# again, then unseen points chosen around the device's limit (predicted 110-150 GiB on the
# H200) and in shapes the corpus lacked (PP with EP, TP with virtual PP, block recompute of
# half the layers, 24 MoE layers under full recompute).
EP2, EP4, EP8 = (["--expert-model-parallel-size", str(n)] for n in (2, 4, 8))
BATCHES["D"] = [c for c in BATCHES["B"] + BATCHES["A"] if c["name"] in (
    "mixtral-l16-ep2-s4k-m2-full", "llama8b-l8-dp8-s2k-m1")] + [
    config("gpt2k-l28-dp8-s2k-m8", "gpt2k", 28, 8, 0, 2048, 8),
    config("gpt2k-l32-dp8-s2k-m8", "gpt2k", 32, 8, 0, 2048, 8),
    config("llama8b-l16-dp8-s4k-m2-nodistopt", "llama8b", 16, 8, 0, 4096, 2),
    config("mixtral-l16-ep4-s4k-m2-selective", "mixtral", 16, 8, 0, 4096, 2,
           extra=DO + A2A + SEL + EP4),
    config("dsmoe-l16-ep8-s4k-m4-a2a", "dsmoe", 16, 8, 0, 4096, 4, extra=DO + A2A + EP8),
    config("llama8b-l8-dp8-s8k-m2", "llama8b", 8, 8, 0, 8192, 2, extra=DO),
    config("mixtral-l16-pp2ep4-s4k-m1-a2a-first", "mixtral", 16, 16, 0, 4096, 1, 4, pp=2,
           extra=DO + A2A + EP4),
    config("llama8b-l32-tp2pp4vpp2-s4k-m1-first", "llama8b", 32, 16, 0, 4096, 1, 8, tp=2, pp=4,
           extra=DO + ["--num-layers-per-virtual-pipeline-stage", "4"]),
    config("gpt2k-l24-dp8-s4k-m4-block", "gpt2k", 24, 8, 0, 4096, 4,
           extra=DO + ["--recompute-granularity", "full", "--recompute-method", "block",
                       "--recompute-num-layers", "12"]),
    config("mixtral-l24-ep4-s4k-m1-full", "mixtral", 24, 8, 0, 4096, 1,
           extra=DO + A2A + FULL + EP4),
]

# Batch E, for an 80 GB H100 (measured after the estimator was last changed: unseen): the
# same models around that device's limit -- two predicted over it, the rest 35-72 GiB --, a
# full-recompute MoE job whose largest parameter buffer is most of its memory (the shape of
# mixtral-l16-ep2's stand-in failure, scaled to the H100), and shapes the corpus lacked
# (PP 2 without virtual stages, 64 experts at 4k, dense full recompute at DP 8).
BATCHES["E"] = [
    config("mixtral-l9-ep2-s4k-m2-full", "mixtral", 9, 8, 0, 4096, 2,
           extra=DO + A2A + FULL + EP2),
    config("llama8b-l8-dp8-s4k-m3", "llama8b", 8, 8, 0, 4096, 3, extra=DO),
    config("llama8b-l8-dp8-s4k-m4", "llama8b", 8, 8, 0, 4096, 4, extra=DO),
    config("gpt2k-l18-dp8-s2k-m8", "gpt2k", 18, 8, 0, 2048, 8),
    config("mixtral-l8-ep8-s4k-m2-a2a", "mixtral", 8, 8, 0, 4096, 2, extra=DO + A2A + EP8),
    config("llama8b-l16-pp2-s4k-m1-first", "llama8b", 16, 8, 0, 4096, 1, 4, pp=2, extra=DO),
    config("dsmoe-l8-ep8-s4k-m2-a2a", "dsmoe", 8, 8, 0, 4096, 2, extra=DO + A2A + EP8),
    config("llama8b-l16-dp8-s4k-m2-full", "llama8b", 16, 8, 0, 4096, 2, extra=DO + FULL),
    config("llama8b-l16-tp2-s4k-m2-selective", "llama8b", 16, 8, 0, 4096, 2, tp=2,
           extra=DO + SEL),
]


# Batch F, for an 80 GB H100, measured for issue 38 (unseen: after the estimator was last
# changed): full uniform and block recompute with TP x PP and with an interleaved pipeline
# (the shapes a held-out round missed), and three points of batch E again with
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, to measure what the allocator reserves
# beyond the peak with and without it (``max_reserved`` against ``max_allocated``).
EXPANDABLE = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
BLOCK2 = ["--recompute-granularity", "full", "--recompute-method", "block",
          "--recompute-num-layers", "2"]
BATCHES["F"] = [
    config("llama8b-l16-tp2pp2-s4k-m2-full-first", "llama8b", 16, 16, 0, 4096, 2, 4, tp=2,
           pp=2, extra=DO + FULL),
    config("llama8b-l24-tp2pp2-s4k-m1-full-first", "llama8b", 24, 16, 0, 4096, 1, 4, tp=2,
           pp=2, extra=DO + FULL),
    config("llama8b-l32-tp2pp4vpp2-s4k-m1-block-first", "llama8b", 32, 16, 0, 4096, 1, 8,
           tp=2, pp=4, extra=DO + BLOCK2 + ["--num-layers-per-virtual-pipeline-stage", "4"]),
] + [dict(c, name=c["name"] + "-expandable", env=EXPANDABLE) for c in BATCHES["E"] if c["name"] in (
    "llama8b-l8-dp8-s4k-m3", "llama8b-l16-dp8-s4k-m2-full", "mixtral-l8-ep8-s4k-m2-a2a")]


# Batch G, routing set explicitly (MEASURE_MOE_SKEW, see _forced_routing): an expert rank
# receiving 1x (balanced) and 2x its balanced tokens, under both dispatchers; and the
# allocator's fragmentation (inactive_split_peak) with and without expandable segments at
# two points near the H100's limit.
def _skewed(cfg: dict, skew: str, dispatcher: list[str]) -> dict:
    name = cfg["name"].replace("-ag", "") + ("-a2a" if dispatcher == A2A else "-ag")
    argv = [a for a in cfg["argv"]]
    index = argv.index("--moe-token-dispatcher-type")
    argv[index:index + 2] = dispatcher
    return dict(cfg, name=f"{name}-skew{skew}", argv=argv, env={"MEASURE_MOE_SKEW": skew})


_EP4_AG = next(c for c in BATCHES["B"] if c["name"] == "mixtral-l8-ep4-s2k-m2-ag")
_NEAR_LIMIT = [c for c in BATCHES["E"] if c["name"] in (
    "llama8b-l8-dp8-s4k-m3", "mixtral-l8-ep8-s4k-m2-a2a")]
BATCHES["G"] = [_skewed(_EP4_AG, skew, dispatcher) for dispatcher in (A2A, AG)
                for skew in ("1", "2")] + [
    dict(c, name=c["name"] + "-frag") for c in _NEAR_LIMIT] + [
    dict(c, name=c["name"] + "-frag-expandable", env=EXPANDABLE) for c in _NEAR_LIMIT]


def _forced_routing(skew: float) -> None:
    """Route so that this rank's experts (the first ``experts / EP``) receive ``skew`` times
    their balanced tokens: a share ``skew / EP`` of the tokens choose only local experts,
    the rest none of them (needs top-k <= the local experts). With the stand-in
    collectives every rank routes alike, so this rank receives EP copies of that share."""
    import torch
    from megatron.core.transformer.moe.router import TopKRouter

    original = TopKRouter.routing

    def routing(self, logits, *args, **kwargs):
        # the router hands routing() its logits as [sequence, batch, experts]: the bias
        # goes on the experts' axis, over the tokens flattened (batch G's first run put it
        # on the batch axis, which shifted every expert alike and forced nothing)
        ep = self.config.expert_model_parallel_size
        local = self.config.num_moe_experts // ep
        tokens = logits.reshape(-1, logits.shape[-1]).shape[0]
        chosen = int(round(skew / ep * tokens))
        bias = torch.zeros(tokens, logits.shape[-1], dtype=logits.dtype, device=logits.device)
        bias[:, :local] = -1e4
        bias[:chosen, :local] = 1e4
        return original(self, logits + bias.view(logits.shape), *args, **kwargs)

    TopKRouter.routing = routing


# --- the child: one configuration in this process -------------------------------------------

def tile(out, inp) -> None:
    """Fill ``out`` with copies of ``inp`` end to end, in place (the last copy cut short).

    Chunk by chunk: a collective writes into its output and allocates nothing, and neither
    may its stand-in. (Batches A-C built the tiled copy with repeat(), a temporary as large
    as the output: the distributed optimizer's parameter all-gather after each step then
    asked for a second copy of the largest parameter buffer -- 21 GiB for
    mixtral-l16-ep2-s4k-m2-full, which ran out of memory on it.)
    """
    flat_out, flat_in = out.view(-1), inp.reshape(-1)
    size, chunk = flat_out.numel(), flat_in.numel()
    if chunk == 0 or size == 0:
        return
    for start in range(0, size, chunk):
        stop = min(start + chunk, size)
        flat_out[start:stop].copy_(flat_in[: stop - start])


def _symmetric_collectives() -> None:
    """Fill the fake process group's collective outputs with this rank's input (see above)."""
    import torch
    import torch.distributed as dist

    original_gather, original_a2a = dist.all_gather_into_tensor, dist.all_to_all_single
    original_gather_base = getattr(dist, "_all_gather_base", None)

    def all_gather_into_tensor(output_tensor, input_tensor, *args, **kwargs):
        work = original_gather(output_tensor, input_tensor, *args, **kwargs)
        with torch.no_grad():
            tile(output_tensor, input_tensor)
        return work

    def all_to_all_single(output, input, *args, **kwargs):
        work = original_a2a(output, input, *args, **kwargs)
        with torch.no_grad():
            tile(output, input)
        return work

    dist.all_gather_into_tensor = all_gather_into_tensor
    dist.all_to_all_single = all_to_all_single
    if original_gather_base is not None:
        dist._all_gather_base = all_gather_into_tensor
    original_all_gather = dist.all_gather

    def all_gather(tensor_list, tensor, *args, **kwargs):
        work = original_all_gather(tensor_list, tensor, *args, **kwargs)
        with torch.no_grad():
            for t in tensor_list:
                if t.shape == tensor.shape:
                    t.copy_(tensor)
        return work

    dist.all_gather = all_gather


def child(megatron: str, result_path: str, argv: list[str]) -> None:
    import runpy
    import torch

    record: dict = {"peak_after_iteration": [], "allocated_after_iteration": [],
                    "seconds_per_iteration": []}

    def write():
        record["max_allocated"] = torch.cuda.max_memory_allocated()
        record["max_reserved"] = torch.cuda.max_memory_reserved()
        record["allocated_at_end"] = torch.cuda.memory_allocated()
        # the allocator's fragmentation: free space inside segments that also hold live
        # blocks, which it cannot release to serve a larger request (its peak bounds what
        # the job must leave free beyond the allocated peak; docs/memory.md)
        stats = torch.cuda.memory_stats()
        record["inactive_split_peak"] = stats.get("inactive_split_bytes.all.peak")
        record["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        properties = torch.cuda.get_device_properties(0)
        record["device"] = properties.name
        record["device_total_bytes"] = properties.total_memory
        try:
            from megatron.training import get_args
            from megatron.training.theoretical_memory_usage import report_theoretical_memory
            from megatron.core.num_microbatches_calculator import get_num_microbatches
            args = get_args()
            estimate = report_theoretical_memory(args, num_microbatches=get_num_microbatches())
            if estimate:
                record["megatron_estimate_bytes"] = [round(v * 2**20) for v in estimate]
        except Exception as error:  # the estimate is a by-product: never lose the measurement
            record["megatron_estimate_error"] = repr(error)[:300]
        with open(result_path, "w") as handle:
            json.dump(record, handle)

    _symmetric_collectives()
    sys.path.insert(0, megatron)
    if os.environ.get("MEASURE_MOE_SKEW"):
        _forced_routing(float(os.environ["MEASURE_MOE_SKEW"]))
        record["moe_skew"] = float(os.environ["MEASURE_MOE_SKEW"])
    os.chdir(megatron)
    sys.argv = ["pretrain_gpt.py"] + argv
    import megatron.training.training as training

    original_step = training.train_step

    def train_step(*args, **kwargs):
        # the iteration's wall time (compute alone: the fake process group moves no data),
        # which calibrates `megaplug plan`'s compute term (docs/plan.md)
        torch.cuda.synchronize()
        started = time.perf_counter()
        result = original_step(*args, **kwargs)
        torch.cuda.synchronize()
        record["seconds_per_iteration"].append(round(time.perf_counter() - started, 4))
        record["peak_after_iteration"].append(torch.cuda.max_memory_allocated())
        record["allocated_after_iteration"].append(torch.cuda.memory_allocated())
        return result

    training.train_step = train_step
    try:
        runpy.run_path("pretrain_gpt.py", run_name="__main__")
        record["status"] = "ok"
    except BaseException as error:  # SystemExit, OutOfMemoryError and the rest: record, then report
        text = f"{type(error).__name__}: {error}"
        ran_out = "out of memory" in text.lower() or "OutOfMemory" in text
        record["status"] = "oom" if ran_out else "error"
        record["error"] = text[:600]
    write()
    os._exit(0)


# --- the driver ----------------------------------------------------------------------------

def batch_configs(batch: str) -> list[dict]:
    """A batch by its letter, or a JSON file of configurations (``name``, ``world_size``,
    ``rank``, ``argv`` and optionally ``env`` each: what ``megaplug plan`` picks, written by
    ``plugins/megaplug-memory/scripts/plan_batch.py``)."""
    if batch in BATCHES:
        return BATCHES[batch]
    with open(batch) as handle:
        return json.load(handle)


def driver(options) -> None:
    os.makedirs(options.out, exist_ok=True)
    label = os.path.splitext(os.path.basename(options.batch))[0]
    results = os.path.join(options.out, f"corpus-{label}.jsonl")
    logs = os.path.join(options.out, f"logs-{label}.txt")
    started = time.monotonic()
    configs = batch_configs(options.batch)
    if options.only:
        configs = [c for c in configs if c["name"] in options.only.split(",")]
    for cfg in configs:
        elapsed = time.monotonic() - started
        if elapsed > options.budget:
            print(f"budget spent ({elapsed:.0f} s): {cfg['name']} and later not run", flush=True)
            break
        timeout = min(options.per_config, max(30, options.budget + 60 - elapsed))
        result_path = os.path.join(options.scratch, cfg["name"] + ".json")
        if os.path.exists(result_path):
            os.remove(result_path)
        env = dict(os.environ, WORLD_SIZE=str(cfg["world_size"]), RANK=str(cfg["rank"]),
                   LOCAL_RANK="0", MASTER_ADDR="localhost", MASTER_PORT="29555",
                   CUDA_DEVICE_MAX_CONNECTIONS="1", PYTHONUNBUFFERED="1", **cfg.get("env", {}))
        command = [sys.executable, os.path.abspath(__file__), "--child", result_path,
                   "--megatron", os.path.abspath(options.megatron), "--"] + COMMON + cfg["argv"]
        t0 = time.monotonic()
        try:
            run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
            output, code = run.stdout + run.stderr, run.returncode
        except subprocess.TimeoutExpired as expired:
            partial = expired.stdout or ""
            output = partial.decode() if isinstance(partial, bytes) else partial
            code = "timeout"
        seconds = time.monotonic() - t0
        try:
            with open(result_path) as handle:
                measured = json.load(handle)
        except (OSError, ValueError):
            measured = {"status": "no-result"}
        line = dict(cfg, common=COMMON, exit=code, seconds=round(seconds, 1), **measured)
        with open(results, "a") as handle:
            handle.write(json.dumps(line) + "\n")
        tail = [l for l in output.splitlines() if "warn" not in l.lower()][-12:]
        with open(logs, "a") as handle:
            handle.write(f"==== {cfg['name']} exit {code} {seconds:.1f}s\n"
                         + "\n".join(tail) + "\n")
        peak = measured.get("max_allocated")
        print(f"{cfg['name']:45s} {measured.get('status')!s:9s} {seconds:6.1f}s "
              f"peak {peak / 2**30 if peak else float('nan'):7.2f} GiB "
              f"megatron {measured.get('megatron_estimate_bytes', [0, 0, 0])[2] / 2**30:7.2f} GiB",
              flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron", default=".mlm-mem/mlm")
    parser.add_argument("--batch", default="A",
                        help="a batch letter (" + ", ".join(sorted(BATCHES)) + ") or a JSON file")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/memory-corpus"))
    parser.add_argument("--scratch", default="/tmp")
    parser.add_argument("--budget", type=float, default=520,
                        help="start no config after this many seconds")
    parser.add_argument("--per-config", type=float, default=120)
    parser.add_argument("--only", default="")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--child")
    options, rest = parser.parse_known_args()
    if options.list:
        for batch, configs in BATCHES.items():
            for cfg in configs:
                print(batch, cfg["name"], cfg["world_size"], cfg["rank"], " ".join(cfg["argv"]))
        return
    if options.child:
        child(options.megatron, options.child, rest[1:] if rest[:1] == ["--"] else rest)
        return
    driver(options)


if __name__ == "__main__":
    main()
