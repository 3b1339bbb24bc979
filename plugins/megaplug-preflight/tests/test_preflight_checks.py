"""Each family of pre-flight checks: launches Megatron's validate_args accepts but its model
configuration rejects are rejected at resolve time, naming the flags; near misses pass.

(The Megatron tier, tests/megatron/, checks the same against Megatron's own code.)
"""

from __future__ import annotations

import pytest

from preflight_launches import MLA, MLA_FUSED, MOE, preflight_problems, problems

#: (id, extra arguments, a fragment of the expected message, a flag the problem names)
REJECTED = [
    # model shape and initialization
    ("no layers", ["--num-layers", "0"], "--num-layers 0 must be at least 1", "--num-layers"),
    ("xavier init", ["--init-method-xavier-uniform"],
     "--init-method-xavier-uniform is not accepted", "--init-method-xavier-uniform"),
    ("expert TP 0", [*MOE, "--expert-tensor-parallel-size", "0"],
     "--expert-tensor-parallel-size 0 leaves no rank", "--expert-tensor-parallel-size"),
    # attention heads and query groups over tensor-parallel ranks
    ("heads over TP", ["--num-attention-heads", "6", "--kv-channels", "16",
                       "--tensor-model-parallel-size", "4"],
     "--num-attention-heads 6 cannot be split over --tensor-model-parallel-size 4",
     "--num-attention-heads"),
    ("query groups over TP", ["--group-query-attention", "--num-query-groups", "3",
                              "--num-attention-heads", "12", "--kv-channels", "16",
                              "--tensor-model-parallel-size", "2"],
     "--num-query-groups 3 is neither a multiple nor a divisor", "--num-query-groups"),
    # RoPE, MLA, DSA, gated delta net
    ("rope type", ["--position-embedding-type", "rope", "--rope-type", "yarn"],
     "--rope-type yarn needs --multi-latent-attention", "--rope-type"),
    ("mla interleaved", [*MLA, "--rotary-interleaved"], "--rotary-interleaved does not work",
     "--rotary-interleaved"),
    ("mla rope fusion", [*MLA_FUSED, "--rope-type", "rope"],
     "needs --rope-type yarn", "--rope-type"),
    ("mla output gate", [*MLA, "--attention-output-gate"], "--attention-output-gate",
     "--attention-output-gate"),
    ("no-rope period", ["--position-embedding-type", "rope", "--no-rope-freq", "3"],
     "--no-rope-freq 3 does not divide --num-layers 8", "--no-rope-freq"),
    ("dsa bias", [*MLA, "--experimental-attention-variant", "dsa"],
     "DeepSeek sparse attention (DSA) needs linear layers without bias", "--disable-bias-linear"),
    ("gdn heads", ["--experimental-attention-variant", "gdn", "--linear-attention-freq", "2",
                   "--linear-num-key-heads", "3", "--linear-num-value-heads", "6",
                   "--tensor-model-parallel-size", "2"],
     "--linear-num-key-heads 3 cannot be split", "--linear-num-key-heads"),
    # mixture of experts
    ("expert ffn without experts", ["--moe-ffn-hidden-size", "256"],
     "--moe-ffn-hidden-size 256 is set but --num-experts is not", "--moe-ffn-hidden-size"),
    ("top-1 softmax", [*MOE, "--moe-router-topk", "1"], "needs --moe-router-pre-softmax",
     "--moe-router-topk"),
    ("expert bias score", [*MOE, "--moe-router-enable-expert-bias"],
     "needs --moe-router-score-function sigmoid or sqrtsoftplus, got softmax",
     "--moe-router-score-function"),
    ("capacity with sinkhorn", [*MOE, "--moe-expert-capacity-factor", "1.0",
                                "--moe-router-load-balancing-type", "sinkhorn"],
     "--moe-expert-capacity-factor does not work with --moe-router-load-balancing-type sinkhorn",
     "--moe-expert-capacity-factor"),
    ("pad without capacity", [*MOE, "--moe-pad-expert-input-to-capacity"],
     "needs a non-negative --moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity"),
    ("shared overlap allgather", [*MOE, "--moe-token-dispatcher-type", "allgather",
                                  "--moe-shared-expert-intermediate-size", "128",
                                  "--moe-shared-expert-overlap"],
     "--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall",
     "--moe-shared-expert-overlap"),
    ("aux coefficients", [*MOE, "--moe-router-load-balancing-type", "aux_loss", "seq_aux_loss",
                          "--moe-aux-loss-coeff", "0.01"],
     "2 load-balancing types need 2 --moe-aux-loss-coeff values, got 1", "--moe-aux-loss-coeff"),
    ("ncclep without flex", [*MOE, "--moe-flex-dispatcher-backend", "ncclep"],
     "--moe-flex-dispatcher-backend ncclep needs --moe-token-dispatcher-type flex",
     "--moe-token-dispatcher-type"),
    ("grouped tensor", [*MOE, "--moe-use-grouped-tensor"],
     "--moe-use-grouped-tensor needs --moe-grouped-gemm", "--moe-grouped-gemm"),
    ("group routing", [*MOE, "--moe-router-group-topk", "2"],
     "--moe-router-group-topk needs --moe-router-num-groups", "--moe-router-num-groups"),
    ("padding without fp8", [*MOE, "--moe-router-padding-for-quantization"],
     "needs FP8 or FP4 training", "--moe-router-padding-for-quantization"),
    ("expert bias with ETP", [*MOE[:-1], "--tensor-model-parallel-size", "2",
                              "--sequence-parallel"],
     "MoE layers with linear biases need expert tensor parallel size 1", "--disable-bias-linear"),
    # recomputation and CPU offloading
    ("full without method", ["--recompute-granularity", "full", "--recompute-num-layers", "1"],
     "--recompute-granularity full needs --recompute-method", "--recompute-method"),
    ("full without layers", ["--recompute-granularity", "full", "--recompute-method", "block"],
     "--recompute-granularity full needs --recompute-num-layers", "--recompute-num-layers"),
    ("selective with layers", ["--recompute-granularity", "selective",
                               "--recompute-num-layers", "2"],
     "--recompute-num-layers 2 does not apply to selective", "--recompute-num-layers"),
    ("mla_up_proj without MLA", ["--recompute-granularity", "selective", "--recompute-modules",
                                 "mla_up_proj"],
     "--recompute-modules mla_up_proj needs --multi-latent-attention", "--recompute-modules"),
    ("fp8 layernorm recompute", ["--recompute-granularity", "selective", "--recompute-modules",
                                 "layernorm", "--fp8-format", "hybrid"],
     "does not work with --fp8-recipe delayed", "--fp8-recipe"),
    ("cpu offloading layers", ["--cpu-offloading-num-layers", "8"],
     "--cpu-offloading-num-layers 8 must be below --num-layers 8", "--cpu-offloading-num-layers"),
    ("cpu offloading recompute", ["--cpu-offloading-num-layers", "2", "--recompute-activations"],
     "does not work with activation recomputation", "--recompute-granularity"),
    # fine-grained activation offloading
    ("offload attn_proj alone", ["--fine-grained-activation-offloading", "--offload-modules",
                                 "attn_proj"],
     "--offload-modules attn_proj needs core_attn offloaded too", "--offload-modules"),
    ("offload fraction", ["--fine-grained-activation-offloading", "--offload-modules",
                          "core_attn", "--activation-offload-fraction", "2"],
     "--activation-offload-fraction 2.0 must be between 0 and 1",
     "--activation-offload-fraction"),
    ("paged stash", [*MOE, "--moe-paged-stash"],
     "--moe-paged-stash needs --moe-expert-rank-capacity-factor", "--moe-paged-stash"),
    # FP8 / FP4
    ("bf16 edges delayed", ["--fp8-format", "hybrid", "--first-last-layers-bf16"],
     "--first-last-layers-bf16 does not work with --fp8-recipe delayed",
     "--first-last-layers-bf16"),
    ("bf16 edges count", ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise",
                          "--first-last-layers-bf16", "--num-layers-at-end-in-bf16", "9"],
     "--num-layers-at-end-in-bf16 9 must be between 0 and the 8 layers",
     "--num-layers-at-end-in-bf16"),
    ("custom recipe", ["--fp8-format", "e4m3", "--fp8-recipe", "custom"],
     "--fp8-recipe custom needs --fp8-quantizer-factory", "--fp8-quantizer-factory"),
    ("fp8 output proj", ["--fp8-output-proj", "--fp8-format", "e4m3", "--fp8-recipe",
                         "tensorwise"],
     "--fp8-output-proj needs --fp8-recipe mxfp8, got tensorwise", "--fp8-output-proj"),
    # expert-parallel overlap
    ("ep overlap allgather", [*MOE, "--moe-token-dispatcher-type", "allgather",
                              "--overlap-moe-expert-parallel-comm"],
     "--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type alltoall or flex",
     "--overlap-moe-expert-parallel-comm"),
    ("ep overlap recompute", [*MOE, "--overlap-moe-expert-parallel-comm",
                              "--moe-layer-recompute"],
     "does not work with recomputing MoE layers", "--recompute-modules"),
    ("delay wgrad", [*MOE, "--delay-wgrad-compute"],
     "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"),
    ("early release", [*MOE, "--ep-overlap-early-attn-memory-release"],
     "--ep-overlap-early-attn-memory-release needs", "--ep-overlap-early-attn-memory-release"),
    # activations and fusions
    ("squared relu fusion", ["--squared-relu"],
     "bias-activation fusion (on by default) has no kernel for the squared ReLU activation",
     "--no-bias-gelu-fusion"),
    ("glu offset", ["--swiglu", "--glu-linear-offset", "0.5"],
     "--glu-linear-offset 0.5 with bias-activation fusion needs the quick GeGLU activation",
     "--glu-linear-offset"),
    ("te activation", ["--swiglu", "--use-te-activation-func"],
     "--use-te-activation-func cannot both be on", "--use-te-activation-func"),
    ("fused residual rmsnorm", ["--fused-residual-rmsnorm"],
     "--fused-residual-rmsnorm needs --normalization RMSNorm", "--normalization"),
    ("clamped swiglu dense", ["--swiglu", "--activation-func-clamp-value", "7"],
     "only supported for MoE models", "--activation-func-clamp-value"),
    # pipeline stages
    ("uneven middle", ["--pipeline-model-parallel-size", "4",
                       "--decoder-first-pipeline-num-layers", "3"],
     "the 5 layers between the first and last stage cannot be split evenly over 3",
     "--decoder-first-pipeline-num-layers"),
    ("empty first stage", ["--pipeline-model-parallel-size", "4",
                           "--decoder-first-pipeline-num-layers", "0"],
     "--decoder-first-pipeline-num-layers 0 must be at least 1",
     "--decoder-first-pipeline-num-layers"),
    ("uneven with accounting", ["--pipeline-model-parallel-size", "2",
                                "--decoder-first-pipeline-num-layers", "4",
                                "--account-for-loss-in-pipeline-split"],
     "cannot be combined with --account-for-loss-in-pipeline-split",
     "--account-for-loss-in-pipeline-split"),
    ("layout layer count", ["--pipeline-model-parallel-size", "2",
                            "--pipeline-model-parallel-layout", "Ettt|tttL"],
     "places 6 decoder layers ('t'), but --num-layers 8", "--pipeline-model-parallel-layout"),
    ("defer embedding wgrad", ["--defer-embedding-wgrad-compute"],
     "--defer-embedding-wgrad-compute needs pipeline parallelism",
     "--defer-embedding-wgrad-compute"),
    # CUDA graphs
    ("moe graph on dense", ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                            "moe_router"],
     "captures MoE modules, but the model has no experts", "--cuda-graph-modules"),
    ("full recompute graph", ["--cuda-graph-impl", "transformer_engine",
                              "--recompute-granularity", "full", "--recompute-method", "block",
                              "--recompute-num-layers", "1"],
     "needs --cuda-graph-impl full_iteration", "--cuda-graph-impl"),
    # inference-only options
    ("fuse tp in training", ["--inference-fuse-tp-communication"],
     "--inference-fuse-tp-communication needs --transformer-impl inference_optimized",
     "--inference-fuse-tp-communication"),
    ("inference optimized layers", ["--transformer-impl", "inference_optimized"],
     "needs --normalization RMSNorm", "--normalization"),
    # batch invariance
    ("batch invariant attention", ["--batch-invariant-mode"],
     "--batch-invariant-mode needs --attention-backend flash", "--attention-backend"),
    # parallelism
    ("cp comm per layer", ["--context-parallel-size", "2", "--cp-comm-type", "p2p", "a2a"],
     "--cp-comm-type lists 2 types, but the model has --num-layers 8", "--cp-comm-type"),
    # hyper-connections
    ("mhc with pipeline", ["--enable-mhc-connections", "--pipeline-model-parallel-size", "2"],
     "--enable-mhc-connections does not work with pipeline parallelism",
     "--pipeline-model-parallel-size"),
    ("mhc recompute", ["--recompute-granularity", "selective", "--recompute-modules", "mhc"],
     "--recompute-modules mhc needs --enable-mhc-connections", "--enable-mhc-connections"),
]

#: Near misses of the launches above that Megatron builds without complaint.
ACCEPTED = [
    ("heads over TP", ["--num-attention-heads", "12", "--kv-channels", "16",
                       "--tensor-model-parallel-size", "4"]),
    ("query groups replicated", ["--group-query-attention", "--num-query-groups", "2",
                                 "--tensor-model-parallel-size", "4"]),
    ("mla yarn fusion", [*MLA_FUSED, "--rope-type", "yarn"]),
    ("rope fusion", ["--position-embedding-type", "rope", "--rotary-interleaved"]),
    ("expert ffn in mixed model", ["--moe-ffn-hidden-size", "256", "--moe-layer-freq", "2"]),
    ("top-1 pre-softmax", [*MOE, "--moe-router-topk", "1", "--moe-router-pre-softmax"]),
    ("expert bias sigmoid", [*MOE, "--moe-router-enable-expert-bias",
                             "--moe-router-score-function", "sigmoid"]),
    ("capacity padding", [*MOE, "--moe-expert-capacity-factor", "1.0",
                          "--moe-pad-expert-input-to-capacity"]),
    ("full recompute", ["--recompute-granularity", "full", "--recompute-method", "uniform",
                        "--recompute-num-layers", "1"]),
    ("offload", ["--fine-grained-activation-offloading", "--offload-modules", "core_attn",
                 "attn_proj"]),
    ("bf16 edges", ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise",
                    "--first-last-layers-bf16"]),
    ("ep overlap", [*MOE, "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]),
    ("squared relu", ["--squared-relu", "--no-bias-gelu-fusion"]),
    ("quick geglu offset", ["--quick-geglu", "--glu-linear-offset", "0.5"]),
    ("uneven split", ["--pipeline-model-parallel-size", "4",
                      "--decoder-first-pipeline-num-layers", "1",
                      "--decoder-last-pipeline-num-layers", "1"]),
    ("layout", ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-layout",
                "Etttt|ttttL"]),
    ("router graph", [*MOE, "--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules",
                      "attn", "moe_router"]),
    ("mhc", ["--enable-mhc-connections", "--recompute-granularity", "selective",
             "--recompute-modules", "mhc"]),
    ("moe defaults", MOE),
    ("mla defaults", MLA),
]


@pytest.mark.parametrize("argv,fragment,flag", [pytest.param(*case[1:], id=case[0])
                                                for case in REJECTED])
def test_rejected_before_launch(argv: list[str], fragment: str, flag: str) -> None:
    found = preflight_problems(argv)
    matching = [p for p in found if fragment in p.message]
    assert matching, f"expected a problem containing {fragment!r}, got {[str(p) for p in found]}"
    problem = matching[0]
    assert problem.message.endswith("Megatron would raise this when building the model")
    assert flag in problem.flags
    assert problem.hint


@pytest.mark.parametrize("argv", [pytest.param(case[1], id=case[0]) for case in ACCEPTED])
def test_near_misses_accepted(argv: list[str]) -> None:
    assert preflight_problems(argv) == []


def test_a_tensor_parallel_size_of_zero_is_one_problem_not_two() -> None:
    """The expert tensor-parallel size defaults to the tensor-parallel size: TP 0 is the
    parallel plugin's problem, and pre-flight does not report its knock-on a second time."""
    found = problems([*MOE, "--tensor-model-parallel-size", "0"])
    assert [(p.plugin, p.message, tuple(p.flags)) for p in found] == [
        ("parallel", "--tensor-model-parallel-size is 0; it must be at least 1",
         ("--tensor-model-parallel-size",))]


def test_an_expert_tensor_parallel_size_of_zero_given_is_its_own_problem() -> None:
    found = problems([*MOE, "--tensor-model-parallel-size", "0",
                      "--expert-tensor-parallel-size", "0"])
    assert [(p.plugin, tuple(p.flags)) for p in found] == [
        ("parallel", ("--tensor-model-parallel-size",)),
        ("preflight", ("--expert-tensor-parallel-size",))]
