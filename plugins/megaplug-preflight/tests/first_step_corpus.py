"""Launches that Megatron's own code kills after the model is built, each with a control.

Every launch is the small dense base of ``preflight_launches.py`` (8 ranks) plus a few flags,
on a stated cluster (its packages), labelled with what Megatron's code does at its first
step, release by release: it dies with Megatron's message (``dies``: the releases whose code
raises, found by ``scripts/first_step_raises.py`` and read in each release), or it trains.
Each killed launch has a control that differs by one flag (or one package) and trains in
every release. ``valid`` is the range of releases that have the launch's flags at all and
whose ``validate_args`` accepts it (outside it the launch is no first-step question).

``test_first_step_corpus.py`` holds megaplug to the labels at every release in range (it
refuses every killed launch, naming the release, and accepts every control);
``megatron/test_first_step_reference.py`` runs the raising code of megatron-core 0.19.2 on
each launch and checks the labels against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from megaplug.environment._releases import RELEASES, place_of
from preflight_launches import CLUSTER, DENSE, MLA, MOE

PP2_VPP2 = ["--pipeline-model-parallel-size", "2", "--num-virtual-stages-per-pipeline-rank", "2"]
SINKHORN = [*MOE, "--moe-router-load-balancing-type", "sinkhorn", "--moe-router-topk", "1"]
LATENT = [*MOE, "--moe-latent-size", "64", "--moe-shared-expert-intermediate-size", "256"]
NO_TE = {**CLUSTER, "transformer_engine": None}
LOCAL = ["--transformer-impl", "local"]
SAVE = ["--save", "/tmp/megaplug-first-step", "--save-interval", "5"]
LOCAL_CKPT = [*SAVE, "--non-persistent-ckpt-type", "local", "--non-persistent-save-interval",
              "5", "--non-persistent-local-ckpt-dir", "/tmp/megaplug-first-step-local",
              "--use-distributed-optimizer"]
RESILIENCY = {**CLUSTER, "nvidia_resiliency_ext": "0.4.1"}
FIRST, LAST = RELEASES[0], "main"
#: The base without its precision flag, for launches that choose their own.
NO_PRECISION = tuple(flag for flag in DENSE if flag != "--bf16")
FLEX = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
        "flex", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
QUANTILE = [*MOE, "--moe-router-load-balancing-type", "quantile_balancing"]
MTP = ["--position-embedding-type", "rope", "--no-rope-fusion", "--mtp-num-layers", "1",
       "--recompute-granularity", "full", "--recompute-method", "uniform"]


@dataclass(frozen=True)
class Launch:
    """One launch and what Megatron's code does with it at its first step."""

    name: str
    argv: list[str]
    #: Megatron's message (a fragment of it) and the releases whose code raises it.
    dies: tuple[str, str, str] | None = None
    #: The releases that take the launch (its flags exist, validate_args accepts it).
    valid: tuple[str, str] = (FIRST, LAST)
    packages: dict[str, Any] = field(default_factory=lambda: dict(CLUSTER))
    #: The rule that refuses it (``first_step.NAME``), or the killed launch it controls.
    rule: str = ""
    #: The flags ``argv`` is added to.
    base: tuple[str, ...] = tuple(DENSE)

    def releases(self) -> list[str]:
        """The measured releases in ``valid`` (the seed, megaplug's own line, is left out)."""
        first, last = (place_of(r) for r in self.valid)
        return [r for r in RELEASES if first <= place_of(r) <= last and r != "seed"]

    def killed_at(self, release: str) -> bool:
        """Whether Megatron ``release``'s code raises for this launch."""
        return self.dies is not None and \
            place_of(self.dies[1]) <= place_of(release) <= place_of(self.dies[2])


def _without(argv: list[str], flags: list[str]) -> list[str]:
    """``argv`` without the run of tokens ``flags`` (a flag and its value, as written)."""
    for start in range(len(argv) - len(flags) + 1):
        if argv[start:start + len(flags)] == flags:
            return argv[:start] + argv[start + len(flags):]
    raise ValueError(f"{flags} is not in {argv}")


def _pair(rule: str, argv: list[str], fix: list[str], says: str, first: str = FIRST,
          last: str = LAST, *, valid: tuple[str, str] = (FIRST, LAST),
          packages: dict[str, Any] | None = None, control_packages: dict[str, Any] | None = None,
          drop: list[str] | None = None, base: tuple[str, ...] = tuple(DENSE)) -> list[Launch]:
    """A killed launch and its control: ``fix`` appended, or ``drop`` removed (a flag and,
    when it has one, its value), or other packages."""
    killed = Launch(rule, argv, (says, first, last), valid, dict(packages or CLUSTER), rule,
                    base)
    control = _without(argv, drop or []) + fix
    return [killed, Launch(f"{rule} (control)", control, None, valid,
                           dict(control_packages or packages or CLUSTER), rule, base)]


LAUNCHES: list[Launch] = [
    *_pair("moe_with_tensor_parallelism_needs_sequence_parallelism",
           [*MOE, "--tensor-model-parallel-size", "2"], ["--sequence-parallel"],
           "performance may degrade if MoE and tensor parallelism"),
    *_pair("moe_router_needs_transformer_engine_before_0_17", [*MOE, *LOCAL], [],
           "name 'te_general_gemm' is not defined", FIRST, "0.16.1", packages=NO_TE,
           control_packages=CLUSTER),
    *_pair("interleaved_schedule_micro_batch_groups", PP2_VPP2, ["--global-batch-size", "16"],
           "should range in [PP=2 , M=1]"),
    *_pair("interleaved_schedule_micro_batch_groups (remainder)",
           [*PP2_VPP2, "--global-batch-size", "32",
            "--microbatch-group-size-per-virtual-pipeline-stage", "3"],
           ["--microbatch-group-size-per-virtual-pipeline-stage", "2"],
           "The remainder of M (the total micro-batches) divided by N",
           drop=["--microbatch-group-size-per-virtual-pipeline-stage", "3"]),
    *_pair("sinkhorn_routing_without_aux_loss", [*SINKHORN, "--moe-aux-loss-coeff", "0.01"],
           [], "Sinkhorn routing does not support aux loss.",
           drop=["--moe-aux-loss-coeff", "0.01"]),
    *_pair("latent_moe_excludes_shared_expert_overlap", [*LATENT, "--moe-shared-expert-overlap"],
           [], "Shared expert overlap", "0.16.0", valid=("0.16.0", LAST),
           drop=["--moe-shared-expert-overlap"]),
    *_pair("te_cross_entropy_needs_transformer_engine",
           [*LOCAL, "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te"],
           ["--cross-entropy-fusion-impl", "native"],
           "Trying to use a TE block when it's not present.", FIRST, "0.18.0",
           valid=(FIRST, "0.18.0"), packages=NO_TE, drop=["--cross-entropy-fusion-impl", "te"]),
    *_pair("probs_on_input_needs_top_1_routing", [*MOE, "--moe-apply-probs-on-input"],
           ["--moe-router-topk", "1", "--moe-router-pre-softmax"],
           "only works with `moe_router_topk`=1."),
    *_pair("per_token_loss_excludes_average_in_collective",
           ["--calculate-per-token-loss", "--ddp-average-in-collective"], [],
           "Cannot average in collective when calculating per-token loss!",
           drop=["--ddp-average-in-collective"]),
    *_pair("manual_gc_interval_not_negative", ["--manual-gc", "--manual-gc-interval", "-1"],
           ["--manual-gc-interval", "0"], "Manual garbage collection interval should be",
           drop=["--manual-gc-interval", "-1"]),
    *_pair("async_save_needs_a_distributed_format",
           [*SAVE, "--async-save", "--ckpt-format", "torch"], ["--ckpt-format", "torch_dist"],
           "Async checkpoint save not implemented for legacy checkpoints",
           drop=["--ckpt-format", "torch"]),
    *_pair("local_checkpoints_exclude_fully_reshardable_optimizer",
           [*LOCAL_CKPT, "--dist-ckpt-optim-fully-reshardable"], [],
           "Local checkpointing does not support optimizer sharding type 'fully_reshardable'",
           "0.15.0", valid=("0.15.0", LAST), packages=RESILIENCY,
           drop=["--dist-ckpt-optim-fully-reshardable"]),
    *_pair("quantile_balancing_limits",
           [*QUANTILE, "--moe-router-num-groups", "2", "--moe-router-group-topk", "1"], [],
           "does not support group-limited routing.", "0.19.0", valid=("0.19.0", LAST),
           drop=["--moe-router-num-groups", "2", "--moe-router-group-topk", "1"]),
    *_pair("quantile_balancing_limits (router fusion)", [*QUANTILE, "--moe-router-fusion"], [],
           "does not support moe_router_fusion.", "0.19.0", valid=("0.19.0", LAST),
           drop=["--moe-router-fusion"]),
    *_pair("mtp_uniform_recompute_one_layer", [*MTP, "--recompute-num-layers", "2"],
           ["--recompute-num-layers", "1"], "recompute_num_layers must be 1 for MTP recompute",
           "0.14.0", drop=["--recompute-num-layers", "2"]),
    *_pair("muon_excludes_fp16", ["--optimizer", "muon", "--fp16"], ["--bf16"],
           "with fp16 is not supported.", "0.16.0", valid=("0.16.0", LAST), drop=["--fp16"],
           base=NO_PRECISION),
    *_pair("fp32_reduce_scatter_needs_one_optimizer_instance",
           ["--use-distributed-optimizer", "--ddp-reduce-scatter-with-fp32-accumulation",
            "--grad-reduce-in-bf16", "--num-distributed-optimizer-instances", "2"], [],
           "RS w/ FP32 accumulation not supported", "0.16.0", valid=("0.16.0", LAST),
           drop=["--num-distributed-optimizer-instances", "2"]),
    *_pair("partial_distributed_optimizer_needs_it",
           ["--num-distributed-optimizer-instances", "2"], ["--use-distributed-optimizer"],
           "Partial DistOpt cannot be used without DistOpt"),
    *_pair("mla_flops_exclude_group_query_attention",
           [*MLA, "--group-query-attention", "--num-query-groups", "2"], [],
           "in num_floating_point_operations", FIRST, "0.15.3", valid=(FIRST, "0.15.3"),
           drop=["--group-query-attention", "--num-query-groups", "2"]),
    *_pair("early_flex_dispatcher_needs_deep_ep", FLEX, ["--moe-enable-deepep"],
           "DeepEP is not enabled.", FIRST, "0.15.3"),
]
