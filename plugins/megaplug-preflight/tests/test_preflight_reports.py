"""Each pre-flight rejection whole: the message, every flag it names and the hint (the
family tests, test_preflight_checks.py, check a fragment and one flag). Every problem here
ends with "; Megatron would raise this when building the model"."""

from __future__ import annotations

import pytest
from preflight_launches import DENSE, ENVIRON, MLA, preflight_problems, target
from test_preflight_checks import REJECTED

import megaplug

AT_MODEL_BUILD = "; Megatron would raise this when building the model"


@pytest.mark.parametrize("name, argv", [pytest.param(c[0], c[1], id=c[0]) for c in REJECTED])
def test_each_rejection_whole(name: str, argv: list[str]) -> None:
    found = preflight_problems(argv)
    assert all(p.message.endswith(AT_MODEL_BUILD) for p in found)
    assert [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
            for p in found] == EXPECTED[name]


def test_every_rejection_is_pinned() -> None:
    assert sorted(EXPECTED) == sorted(c[0] for c in REJECTED)


GDN = ["--experimental-attention-variant", "gdn", "--linear-attention-freq", "2",
       "--linear-conv-kernel-dim", "4", "--linear-key-head-dim", "16",
       "--linear-value-head-dim", "16", "--linear-num-key-heads", "4",
       "--linear-num-value-heads", "8"]
DSA = [*MLA, "--experimental-attention-variant", "dsa", "--disable-bias-linear",
       "--no-rope-fusion"]


def whole(argv: list[str], capability: tuple[int, int] | None = (9, 0)) -> list[tuple]:
    try:
        megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON),
                         target=target(capability=capability))
    except megaplug.ConfigError as error:
        return [(p.plugin, p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
                for p in error.problems]
    return []


@pytest.mark.parametrize("argv, capability, expected", [
    (GDN, (9, 0), []),
    ([a for a in GDN if a not in ("--linear-attention-freq", "2")], (9, 0),
     [("preflight", "the gated delta net attention variant needs --linear-attention-freq",
       ("--experimental-attention-variant", "--linear-attention-freq"),
       "set --linear-attention-freq (every N-th layer uses standard attention)")]),
    ([*GDN, "--linear-num-value-heads", "6"], (9, 0),
     [("preflight", "--linear-num-value-heads 6 is not a multiple of --linear-num-key-heads 4",
       ("--linear-num-value-heads", "--linear-num-key-heads"),
       "use a value-head count that is a multiple of the key-head count")]),
    ([*GDN, "--linear-num-value-heads", "4"], (9, 0), []),
    ([*GDN, "--tensor-model-parallel-size", "8"], (9, 0),
     [("preflight", "--linear-num-key-heads 4 cannot be split over tensor x context parallel "
       "ranks (8)",
       ("--linear-num-key-heads", "--tensor-model-parallel-size", "--context-parallel-size"),
       "use a multiple of 8 heads, or smaller parallel sizes")]),
    ([*GDN, "--tensor-model-parallel-size", "4"], (9, 0), []),
    ([*DSA, "--dsa-kernel-backend", "tilelang"], (9, 0),
     [("preflight", "--dsa-kernel-backend tilelang needs tilelang, not installed",
       ("--dsa-kernel-backend",),
       "install the kernel packages, or use --dsa-kernel-backend none")]),
    ([*DSA, "--dsa-kernel-backend", "tilelang"], None,
     [("preflight", "--dsa-kernel-backend tilelang needs a CUDA device, and the target has none",
       ("--dsa-kernel-backend",),
       "use --dsa-kernel-backend none, or state the target GPU with "
       "--assume-device-capability")]),
])
def test_linear_and_sparse_attention_rules_whole(argv, capability, expected):
    assert whole(argv, capability) == expected


EXPECTED = {'no layers': [('--num-layers 0 must be at least 1',
                ('--num-layers',),
                'give the model at least one layer')],
 'xavier init': [("--init-method-xavier-uniform is not accepted by Megatron's model "
                  'configuration (it passes scaled_init_method, which TransformerConfig does '
                  'not have)',
                  ('--init-method-xavier-uniform',),
                  'drop --init-method-xavier-uniform (use --init-method-std)')],
 'expert TP 0': [('--expert-tensor-parallel-size 0 leaves no rank to hold expert weights',
                  ('--expert-tensor-parallel-size',),
                  'use 1 or more (it defaults to --tensor-model-parallel-size)')],
 'heads over TP': [('--num-attention-heads 6 cannot be split over --tensor-model-parallel-size '
                    '4',
                    ('--num-attention-heads', '--tensor-model-parallel-size'),
                    'use a multiple of 4 heads, or a tensor parallel size that divides 6: 1, '
                    '2, 3 or 6')],
 'query groups over TP': [('--num-query-groups 3 is neither a multiple nor a divisor of '
                           '--tensor-model-parallel-size 2',
                           ('--num-query-groups', '--tensor-model-parallel-size'),
                           'use a query-group count that is a multiple or a divisor of 2')],
 'rope type': [('--rope-type yarn needs --multi-latent-attention; standard attention supports '
                'only --rope-type rope',
                ('--rope-type', '--multi-latent-attention'),
                'drop --rope-type (use --position-embedding-type yarn for YaRN), or add '
                '--multi-latent-attention')],
 'mla interleaved': [('--rotary-interleaved does not work with --multi-latent-attention',
                      ('--rotary-interleaved', '--multi-latent-attention'),
                      'drop --rotary-interleaved')],
 'mla rope fusion': [('RoPE fusion (on by default) with --multi-latent-attention needs '
                      '--rope-type yarn, got rope',
                      ('--no-rope-fusion', '--rope-type', '--multi-latent-attention'),
                      'add --no-rope-fusion, or use --rope-type yarn')],
 'mla output gate': [('--attention-output-gate is not supported with --multi-latent-attention',
                      ('--attention-output-gate', '--multi-latent-attention'),
                      'drop --attention-output-gate')],
 'no-rope period': [('--no-rope-freq 3 does not divide --num-layers 8',
                     ('--no-rope-freq', '--num-layers'),
                     'use a period that divides 8: 1, 2, 4 or 8')],
 'dsa bias': [('DeepSeek sparse attention (DSA) needs linear layers without bias, and '
               '--add-bias-linear is on (the default)',
               ('--experimental-attention-variant', '--disable-bias-linear'),
               'add --disable-bias-linear')],
 'gdn heads': [('--linear-num-key-heads 3 cannot be split over tensor x context parallel ranks '
                '(2)',
                ('--linear-num-key-heads',
                 '--tensor-model-parallel-size',
                 '--context-parallel-size'),
                'use a multiple of 2 heads, or smaller parallel sizes')],
 'expert ffn without experts': [('--moe-ffn-hidden-size 256 is set but --num-experts is not',
                                 ('--moe-ffn-hidden-size', '--num-experts'),
                                 'set --num-experts, or drop --moe-ffn-hidden-size')],
 'top-1 softmax': [('--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax',
                    ('--moe-router-topk', '--moe-router-pre-softmax'),
                    'add --moe-router-pre-softmax (or route to 2 or more experts)')],
 'expert bias score': [('--moe-router-enable-expert-bias needs --moe-router-score-function '
                        'sigmoid or sqrtsoftplus, got softmax',
                        ('--moe-router-enable-expert-bias', '--moe-router-score-function'),
                        'use --moe-router-score-function sigmoid')],
 'capacity with sinkhorn': [('--moe-expert-capacity-factor does not work with '
                             '--moe-router-load-balancing-type sinkhorn',
                             ('--moe-expert-capacity-factor',
                              '--moe-router-load-balancing-type'),
                             'use aux_loss, seq_aux_loss, global_aux_loss or none, or drop the '
                             'capacity factor')],
 'pad without capacity': [('--moe-pad-expert-input-to-capacity needs a non-negative '
                           '--moe-expert-capacity-factor',
                           ('--moe-pad-expert-input-to-capacity',
                            '--moe-expert-capacity-factor'),
                           'set --moe-expert-capacity-factor, or drop the padding')],
 'shared overlap allgather': [('--moe-shared-expert-overlap needs --moe-token-dispatcher-type '
                               'alltoall or flex, got allgather',
                               ('--moe-shared-expert-overlap', '--moe-token-dispatcher-type'),
                               'use the alltoall dispatcher, or drop '
                               '--moe-shared-expert-overlap')],
 'aux coefficients': [('2 load-balancing types need 2 --moe-aux-loss-coeff values, got 1',
                       ('--moe-router-load-balancing-type', '--moe-aux-loss-coeff'),
                       'give one coefficient per load-balancing type')],
 'ncclep without flex': [('--moe-flex-dispatcher-backend ncclep needs '
                          '--moe-token-dispatcher-type flex, got alltoall',
                          ('--moe-flex-dispatcher-backend', '--moe-token-dispatcher-type'),
                          'use --moe-token-dispatcher-type flex, or another backend')],
 'grouped tensor': [('--moe-use-grouped-tensor needs --moe-grouped-gemm',
                     ('--moe-use-grouped-tensor', '--moe-grouped-gemm'),
                     'add --moe-grouped-gemm')],
 'group routing': [('--moe-router-group-topk needs --moe-router-num-groups',
                    ('--moe-router-group-topk', '--moe-router-num-groups'),
                    'set --moe-router-num-groups')],
 'padding without fp8': [('--moe-router-padding-for-quantization needs FP8 or FP4 training',
                          ('--moe-router-padding-for-quantization',
                           '--fp8-format',
                           '--fp4-format'),
                          'add --fp8-format or --fp4-format, or drop it')],
 'expert bias with ETP': [('MoE layers with linear biases need expert tensor parallel size 1, '
                           'got 2',
                           ('--disable-bias-linear',
                            '--expert-tensor-parallel-size',
                            '--num-experts'),
                           'add --disable-bias-linear, or --expert-tensor-parallel-size 1')],
 'full without method': [('--recompute-granularity full needs --recompute-method block or '
                          'uniform',
                          ('--recompute-granularity', '--recompute-method'),
                          'add --recompute-method uniform (or block)')],
 'full without layers': [('--recompute-granularity full needs --recompute-num-layers',
                          ('--recompute-granularity', '--recompute-num-layers'),
                          'add --recompute-num-layers N, N between 1 and the 8 layers per '
                          'pipeline stage')],
 'selective with layers': [('--recompute-num-layers 2 does not apply to selective '
                            'recomputation',
                            ('--recompute-num-layers', '--recompute-granularity'),
                            'drop --recompute-num-layers, or use --recompute-granularity '
                            'full')],
 'mla_up_proj without MLA': [('--recompute-modules mla_up_proj needs --multi-latent-attention',
                              ('--recompute-modules', '--multi-latent-attention'),
                              'add --multi-latent-attention, or drop mla_up_proj from '
                              '--recompute-modules')],
 'fp8 layernorm recompute': [('--recompute-modules layernorm does not work with --fp8-recipe '
                              'delayed',
                              ('--recompute-modules', '--fp8-recipe'),
                              'use another FP8 recipe, or drop these modules')],
 'cpu offloading layers': [('--cpu-offloading-num-layers 8 must be below --num-layers 8',
                            ('--cpu-offloading-num-layers', '--num-layers'),
                            'offload at most 7 layers')],
 'cpu offloading recompute': [('--cpu-offloading-num-layers does not work with activation '
                               'recomputation (--recompute-granularity selective)',
                               ('--cpu-offloading-num-layers', '--recompute-granularity'),
                               'drop the recomputation flags, or CPU offloading')],
 'offload attn_proj alone': [('--offload-modules attn_proj needs core_attn offloaded too',
                              ('--offload-modules',),
                              'add core_attn to --offload-modules')],
 'offload fraction': [('--activation-offload-fraction 2.0 must be between 0 and 1',
                       ('--activation-offload-fraction',),
                       'use a fraction in [0, 1]')],
 'paged stash': [('--moe-paged-stash needs --moe-expert-rank-capacity-factor',
                  ('--moe-paged-stash', '--moe-expert-rank-capacity-factor'),
                  'set --moe-expert-rank-capacity-factor')],
 'bf16 edges delayed': [('--first-last-layers-bf16 does not work with --fp8-recipe delayed',
                         ('--first-last-layers-bf16', '--fp8-recipe'),
                         'use another FP8 recipe (tensorwise, mxfp8, blockwise), or drop '
                         '--first-last-layers-bf16')],
 'bf16 edges count': [('--num-layers-at-end-in-bf16 9 must be between 0 and the 8 layers of a '
                       'pipeline stage',
                       ('--num-layers-at-end-in-bf16',
                        '--num-layers',
                        '--pipeline-model-parallel-size'),
                       'keep at most 8 layers in BF16 at each end')],
 'custom recipe': [('--fp8-recipe custom needs --fp8-quantizer-factory',
                    ('--fp8-recipe', '--fp8-quantizer-factory'),
                    "name the factory's import path with --fp8-quantizer-factory "
                    'package.module.function')],
 'fp8 output proj': [('--fp8-output-proj needs --fp8-recipe mxfp8, got tensorwise',
                      ('--fp8-output-proj', '--fp8-recipe'),
                      'use --fp8-recipe mxfp8')],
 'ep overlap allgather': [('--overlap-moe-expert-parallel-comm needs '
                           '--moe-token-dispatcher-type alltoall or flex, got allgather',
                           ('--overlap-moe-expert-parallel-comm',
                            '--moe-token-dispatcher-type'),
                           'use --moe-token-dispatcher-type alltoall')],
 'ep overlap recompute': [('--overlap-moe-expert-parallel-comm does not work with recomputing '
                           'MoE layers (moe in --recompute-modules, or --moe-layer-recompute)',
                           ('--overlap-moe-expert-parallel-comm', '--recompute-modules'),
                           'remove moe from the recomputed modules')],
 'delay wgrad': [('--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm',
                  ('--delay-wgrad-compute', '--overlap-moe-expert-parallel-comm'),
                  'add --overlap-moe-expert-parallel-comm')],
 'early release': [('--ep-overlap-early-attn-memory-release needs '
                    '--overlap-moe-expert-parallel-comm',
                    ('--ep-overlap-early-attn-memory-release',
                     '--overlap-moe-expert-parallel-comm'),
                    'add --overlap-moe-expert-parallel-comm')],
 'squared relu fusion': [('bias-activation fusion (on by default) has no kernel for the '
                          'squared ReLU activation',
                          ('--no-bias-gelu-fusion', '--squared-relu'),
                          'add --no-bias-gelu-fusion')],
 'glu offset': [('--glu-linear-offset 0.5 with bias-activation fusion needs the quick GeGLU '
                 'activation, not SwiGLU',
                 ('--glu-linear-offset', '--no-bias-swiglu-fusion'),
                 'add --no-bias-swiglu-fusion, or use --quick-geglu')],
 'te activation': [('bias-activation fusion (on by default) and --use-te-activation-func '
                    'cannot both be on',
                    ('--no-bias-swiglu-fusion', '--use-te-activation-func'),
                    'add --no-bias-swiglu-fusion, or drop --use-te-activation-func')],
 'fused residual rmsnorm': [('--fused-residual-rmsnorm needs --normalization RMSNorm, got '
                             'LayerNorm',
                             ('--fused-residual-rmsnorm', '--normalization'),
                             'use --normalization RMSNorm, or drop --fused-residual-rmsnorm')],
 'clamped swiglu dense': [('--activation-func-clamp-value with SwiGLU is only supported for '
                           'MoE models',
                           ('--activation-func-clamp-value', '--num-experts'),
                           'set --num-experts, or drop the clamp')],
 'uneven middle': [('the 5 layers between the first and last stage cannot be split evenly over '
                    '3 middle stages',
                    ('--decoder-first-pipeline-num-layers',
                     '--num-layers',
                     '--pipeline-model-parallel-size'),
                    'leave a multiple of 3 layers for the middle stages')],
 'empty first stage': [('--decoder-first-pipeline-num-layers 0 must be at least 1',
                        ('--decoder-first-pipeline-num-layers',),
                        'give the stage at least one layer'),
                       ('the 8 layers between the first and last stage cannot be split evenly '
                        'over 3 middle stages',
                        ('--decoder-first-pipeline-num-layers',
                         '--num-layers',
                         '--pipeline-model-parallel-size'),
                        'leave a multiple of 3 layers for the middle stages')],
 'uneven with accounting': [('--decoder-first-pipeline-num-layers cannot be combined with '
                             '--account-for-loss-in-pipeline-split',
                             ('--decoder-first-pipeline-num-layers',
                              '--account-for-loss-in-pipeline-split'),
                             'size the first/last stages yourself, or let the embedding and '
                             'loss count as layers; not both')],
 'layout layer count': [('--pipeline-model-parallel-layout Ettt|tttL places 6 decoder layers '
                         "('t'), but --num-layers 8",
                         ('--pipeline-model-parallel-layout',
                          '--num-layers',
                          '--mtp-num-layers'),
                         "write the layout as E, then the stages' 't' (and 'm') layers "
                         "separated by '|', then L, e.g. 'Et|(tt|)*3tL'")],
 'defer embedding wgrad': [('--defer-embedding-wgrad-compute needs pipeline parallelism',
                            ('--defer-embedding-wgrad-compute',
                             '--pipeline-model-parallel-size'),
                            'drop it, or use --pipeline-model-parallel-size 2 or more')],
 'moe graph on dense': [('--cuda-graph-modules moe_router captures MoE modules, but the model '
                         'has no experts',
                         ('--cuda-graph-modules', '--cuda-graph-impl'),
                         'choose graph modules that exist in this model')],
 'full recompute graph': [('full recomputation under CUDA graphs needs --cuda-graph-impl '
                           'full_iteration, got transformer_engine',
                           ('--cuda-graph-impl', '--recompute-granularity'),
                           'use selective recomputation, or --cuda-graph-impl full_iteration')],
 'fuse tp in training': [('--inference-fuse-tp-communication needs --transformer-impl '
                          'inference_optimized, got transformer_engine',
                          ('--inference-fuse-tp-communication', '--transformer-impl'),
                          'drop --inference-fuse-tp-communication (it is an inference '
                          'option)')],
 'inference optimized layers': [('--transformer-impl inference_optimized needs --normalization '
                                 'RMSNorm, got LayerNorm',
                                 ('--transformer-impl', '--normalization'),
                                 'use --normalization RMSNorm'),
                                ('--transformer-impl inference_optimized has no linear biases',
                                 ('--transformer-impl',
                                  '--disable-bias-linear',
                                  '--add-qkv-bias'),
                                 'add --disable-bias-linear (and drop --add-qkv-bias)')],
 'batch invariant attention': [('--batch-invariant-mode needs --attention-backend flash, got '
                                'auto',
                                ('--batch-invariant-mode', '--attention-backend'),
                                'use --attention-backend flash'),
                               ('--batch-invariant-mode needs --flash-attention-version 3 or '
                                '4, got None',
                                ('--batch-invariant-mode', '--flash-attention-version'),
                                'add --flash-attention-version 3'),
                               ('--batch-invariant-mode does not support attention dropout',
                                ('--batch-invariant-mode', '--attention-dropout'),
                                'use --attention-dropout 0')],
 'cp comm per layer': [('--cp-comm-type lists 2 types, but the model has --num-layers 8',
                        ('--cp-comm-type', '--num-layers'),
                        'give one type for all layers, or one per layer')],
 'mhc with pipeline': [('--enable-mhc-connections does not work with pipeline parallelism',
                        ('--enable-mhc-connections', '--pipeline-model-parallel-size'),
                        'use --pipeline-model-parallel-size 1')],
 'mhc recompute': [('--recompute-modules mhc needs --enable-mhc-connections',
                    ('--recompute-modules', '--enable-mhc-connections'),
                    'add --enable-mhc-connections')]}


#: Batch-invariant mode with the attention it needs (flash attention 3, no dropout).
BATCH_INVARIANT = ["--batch-invariant-mode", "--attention-backend", "flash",
                   "--flash-attention-version", "3", "--attention-dropout", "0"]
#: MoE over expert parallelism 2, all-to-all dispatch.
MOE_EP2 = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
           "alltoall", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
#: Batch-invariant inference-optimized MoE over expert parallelism 2, otherwise valid.
BATCH_INVARIANT_MOE = [*MOE_EP2, "--transformer-impl", "inference_optimized",
                       "--normalization", "RMSNorm", "--moe-router-dtype", "fp32",
                       *BATCH_INVARIANT]
OPTIMIZED_MOE = "--batch-invariant-mode with --transformer-impl inference_optimized MoE"


@pytest.mark.parametrize("argv, expected", [
    ([], []),
    (["--inference-grouped-gemm-backend", "vllm"], []),
    (["--inference-grouped-gemm-backend", "flashinfer"],
     [("preflight", f"{OPTIMIZED_MOE} needs --inference-grouped-gemm-backend torch or vllm, "
       "got flashinfer", ("--batch-invariant-mode", "--inference-grouped-gemm-backend"),
       "use --inference-grouped-gemm-backend torch or vllm")]),
    (["--inference-moe-token-dispatcher-type", "nvls"], []),
    (["--inference-moe-token-dispatcher-type", "nccl"],
     [("preflight", f"{OPTIMIZED_MOE} and expert parallelism needs "
       "--inference-moe-token-dispatcher-type nvls, got nccl",
       ("--batch-invariant-mode", "--inference-moe-token-dispatcher-type"),
       "use --inference-moe-token-dispatcher-type nvls")]),
    # expert parallelism 1: any dispatcher
    (["--expert-model-parallel-size", "1", "--inference-moe-token-dispatcher-type", "nccl"], []),
])
def test_batch_invariant_inference_optimized_moe_whole(argv, expected):
    assert whole([*BATCH_INVARIANT_MOE, *argv]) == expected


#: Batch-invariant MoE training (all-to-all dispatch, bf16, unfused, dropless), valid.
BATCH_INVARIANT_TRAINING = [*MOE_EP2, *BATCH_INVARIANT]
DEEPGEMM_MISSING = ("batch-invariant MoE with this backend needs DeepGEMM's bf16 grouped GEMMs "
                    "(deep_gemm), not installed", ("--batch-invariant-mode",
                                                   "--batch-invariant-backend"),
                    "install deep_gemm, or use --batch-invariant-backend te_native")
UNFUSED = "batch-invariant MoE needs the unfused permutation, but "
DROPLESS = "batch-invariant MoE supports dropless routing only, but "


@pytest.mark.parametrize("argv, deep_gemm, expected", [
    ([], False, []),
    (["--moe-token-dispatcher-type", "allgather"], False,
     [("batch-invariant MoE training needs --moe-token-dispatcher-type alltoall, got allgather",
       ("--batch-invariant-mode", "--moe-token-dispatcher-type"),
       "use --moe-token-dispatcher-type alltoall")]),
    (["--batch-invariant-backend", "te_native"], False, []),
    (["--batch-invariant-backend", "deepgemm"], False, [DEEPGEMM_MISSING]),
    (["--batch-invariant-backend", "triton"], False, [DEEPGEMM_MISSING]),
    (["--batch-invariant-backend", "deepgemm"], True, []),
    (["--batch-invariant-backend", "triton"], True, []),
    (["--fp8-format", "hybrid"], False,
     [("batch-invariant MoE is bf16-only; FP8 / FP4 are on",
       ("--batch-invariant-mode", "--fp8-format", "--fp4-format"),
       "drop --fp8-format / --fp4-format")]),
    (["--moe-permute-fusion"], False,
     [(f"{UNFUSED}--moe-permute-fusion fuse it",
       ("--batch-invariant-mode", "--moe-permute-fusion"), "drop the permute-fusion flags")]),
    (["--moe-permute-fusion", "--moe-permute-fusion-into-hybridep"], False,
     [(f"{UNFUSED}--moe-permute-fusion and --moe-permute-fusion-into-hybridep fuse it",
       ("--batch-invariant-mode", "--moe-permute-fusion", "--moe-permute-fusion-into-hybridep"),
       "drop the permute-fusion flags")]),
    (["--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor", "1.0"], False,
     [(f"{DROPLESS}--moe-pad-expert-input-to-capacity pad experts",
       ("--batch-invariant-mode", "--moe-pad-expert-input-to-capacity"),
       "drop the padding flags")]),
    (["--moe-pad-experts-for-cuda-graph-inference"], False,
     [(f"{DROPLESS}--moe-pad-experts-for-cuda-graph-inference pad experts",
       ("--batch-invariant-mode", "--moe-pad-experts-for-cuda-graph-inference"),
       "drop the padding flags")]),
])
def test_batch_invariant_moe_training_whole(argv, deep_gemm, expected):
    packages = {"transformer_engine": "2.17.1", **({"deep_gemm": "2.0"} if deep_gemm else {})}
    found = preflight_problems([*BATCH_INVARIANT_TRAINING, *argv], packages=packages)
    assert [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
            for p in found] == expected


def test_batch_invariant_mode_without_experts_asks_nothing_of_moe():
    assert preflight_problems([*BATCH_INVARIANT, "--moe-permute-fusion"]) == []


FULL_RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", "1"]
SELECTIVE_MOE = [*MOE_EP2, "--recompute-granularity", "selective"]


def graphs(impl: str, *more: str) -> list[str]:
    # Megatron asks a whole-iteration graph to leave out the NaN check (its validate_args)
    quiet = ["--no-check-for-nan-in-loss-and-grad"] if impl == "full_iteration" else []
    return ["--cuda-graph-impl", impl, *quiet, *more]


@pytest.mark.parametrize("argv, expected", [
    (graphs("none", *FULL_RECOMPUTE), []),
    (graphs("full_iteration", *FULL_RECOMPUTE), []),
    *[(graphs(impl, *FULL_RECOMPUTE),
       [("preflight", "full recomputation under CUDA graphs needs --cuda-graph-impl "
         f"full_iteration, got {impl}", ("--cuda-graph-impl", "--recompute-granularity"),
         "use selective recomputation, or --cuda-graph-impl full_iteration")])
      for impl in ("local", "transformer_engine")],
    (graphs("transformer_engine", *SELECTIVE_MOE, "--recompute-modules", "moe",
            "--cuda-graph-modules", "moe_router"),
     [("preflight", "recomputing moe does not work with a moe_router CUDA graph under "
       "--cuda-graph-impl transformer_engine", ("--cuda-graph-modules", "--recompute-modules"),
       "drop one of the two")]),
    # near misses: another implementation, another recomputed module, another graphed module
    (graphs("local", *SELECTIVE_MOE, "--recompute-modules", "moe",
            "--cuda-graph-modules", "moe_router"), []),
    (graphs("transformer_engine", *SELECTIVE_MOE, "--recompute-modules", "core_attn",
            "--cuda-graph-modules", "moe_router"), []),
    (graphs("transformer_engine", *SELECTIVE_MOE, "--recompute-modules", "moe",
            "--cuda-graph-modules", "attn"), []),
])
def test_graphs_and_recompute_whole(argv, expected):
    assert whole(argv) == expected
