"""Mutations of the shared parity cases, each aimed at one of Megatron's model-configuration checks.

A probe is a handful of edits to a real launch (set a flag, drop a flag, change the target's
Transformer Engine) and the base launches it applies to. Megatron itself decides what each
mutated launch is: a *rejection* (``validate_args`` accepts it, the model configuration
raises) that pre-flight must reject, a *control* (both accept) that pre-flight must accept,
or neither (``validate_args`` already rejects it: not pre-flight's business).

Edits are written as in a shell: ``"--tensor-model-parallel-size 4"`` sets a flag (replacing
any earlier occurrence and its values), ``"!--no-rope-fusion"`` drops one, ``"TE=2.2.0"``
restates the target's Transformer Engine (``"TE=none"``: stated as not installed), and
``"ENV:NAME=value"`` sets an environment variable of the launch. The world size is then
raised to fit the parallel sizes.
"""

from __future__ import annotations

import copy
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARITY_DIR = Path(
    os.environ.get("MEGAPLUG_PARITY_DIR", Path(__file__).resolve().parents[5] / "shared" / "parity")
)

#: Base launches by kind: real configurations from the shared parity cases.
BASES: dict[str, tuple[str, ...]] = {
    "dense": (
        "gpt__gpt3_mcore_te_tp2_pp2_resume_torch_dist_1node",
        "gpt__gpt3_mcore_te_tp1_pp4_vp1",
    ),
    "rope": ("gpt__gpt3_mcore_te_tp1_pp2_resume_torch_dist_rope_embeddings_1node",),
    "moe": (
        "moe__gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_dist_optimizer",
        "mixtral__mixtral_8x7b_tp1pp4ep8vpp8_release",
    ),
    "mla": (
        "moe__deepseek_proxy_fsdp_ep2_fsdp2",
        "moe__gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_no_mtp_no_a2a_ovlp_fine_grained_offloading",
    ),
    "gdn": ("gpt__gpt3_mcore_te_tp2_pp1_gdn_no_nvrx_async",),
    "hybrid": (
        "hybrid__hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G",
        "nemotron__nemotron3_5_lightning_nightly_tp1_pp1_cp1_ep8_dgx_gb200",
    ),
}


@dataclass(frozen=True)
class Probe:
    """Edits aimed at one check (``aim``, in a ``family``), applied to the bases of ``on``."""

    family: str
    aim: str
    edits: tuple[str, ...]
    on: tuple[str, ...]
    #: Aimed at a check the parity cases' Megatron revision added after megatron-core 0.19.2.
    newer: bool = False


def load_base(name: str) -> dict[str, Any]:
    return json.loads((PARITY_DIR / "cases" / f"{name}.json").read_text())


def parity_launches() -> list[tuple[str, dict[str, Any]]]:
    """Every shared parity case and mutation that Megatron's validate_args accepts."""
    launches = []
    for folder in ("cases", "mutations"):
        for path in sorted((PARITY_DIR / folder).glob("*.json")):
            launch = json.loads(path.read_text())
            if launch.get("expect") == "ok":
                launches.append((path.stem, launch))
    return launches


def _drop(argv: list[str], flag: str) -> list[str]:
    out, skipping = [], False
    for token in argv:
        if token == flag:
            skipping = True
            continue
        if skipping and not token.startswith("--"):
            continue
        skipping = False
        out.append(token)
    return out


def _value(argv: list[str], flag: str, default: int) -> int:
    for i in range(len(argv) - 1, -1, -1):
        if argv[i] == flag and i + 1 < len(argv):
            try:
                return int(argv[i + 1])
            except ValueError:
                return default
    return default


def _fit_world_size(launch: dict[str, Any]) -> None:
    argv, env = launch["argv"], launch.setdefault("env", {})
    tp = _value(argv, "--tensor-model-parallel-size", 1)
    pp = _value(argv, "--pipeline-model-parallel-size", 1)
    cp = _value(argv, "--context-parallel-size", 1)
    ep = _value(argv, "--expert-model-parallel-size", 1)
    etp = _value(argv, "--expert-tensor-parallel-size", tp)
    if min(tp, pp, cp, ep, etp) < 1:
        return
    need = math.lcm(tp * pp * cp, etp * ep * pp)
    world = int(env.get("WORLD_SIZE", "1"))
    if world % need:
        env["WORLD_SIZE"] = str(need)


def apply(base: dict[str, Any], edits: tuple[str, ...]) -> dict[str, Any]:
    """The base launch with the edits applied (the base is not changed)."""
    launch = copy.deepcopy(base)
    argv = list(launch["argv"])
    for edit in edits:
        if edit.startswith("ENV:"):
            name, _, value = edit[4:].partition("=")
            launch.setdefault("env", {})[name] = value
        elif edit.startswith("TE="):
            packages = launch.setdefault("assume", {}).setdefault("packages", {})
            version = edit[3:]
            packages["transformer_engine"] = None if version == "none" else version
        elif edit.startswith("!"):
            argv = _drop(argv, edit[1:])
        else:
            flag, *values = edit.split()
            argv = _drop(argv, flag) + [flag, *values]
    launch["argv"] = argv
    _fit_world_size(launch)
    return launch


def _p(
    family: str, aim: str, *edits: str, on: tuple[str, ...] = ("dense",), newer: bool = False
) -> Probe:
    return Probe(family, aim, edits, on, newer)


MOE = ("moe",)
#: What Megatron's validate_args asks of the environment for offloading and CUDA graphs.
OFFLOAD_ENV = "ENV:NVTE_CPU_OFFLOAD_V1=1"
GRAPH_ENV = "ENV:NCCL_GRAPH_REGISTER=0"
MLA = ("mla",)
ANY = ("dense", "moe")

PROBES: tuple[Probe, ...] = (
    # -- model shape and initialization ------------------------------------------------------
    _p("model shape", "no layers", "--num-layers 0", on=("dense",)),
    _p(
        "attention",
        "dsa kernel backend",
        "--experimental-attention-variant dsa",
        "--dsa-kernel-backend tilelang",
        on=MLA,
    ),
    _p(
        "moe",
        "single grouped weight fp8",
        "--moe-single-grouped-weight",
        "--moe-grouped-gemm",
        "--moe-use-grouped-tensor",
        "--fp8-format e4m3",
        "--fp8-recipe tensorwise",
        on=MOE,
    ),
    _p(
        "recompute",
        "unknown module",
        "--recompute-granularity selective",
        "--recompute-modules attention",
        on=ANY,
    ),
    _p(
        "pipeline",
        "accounting per virtual stage",
        "--account-for-embedding-in-pipeline-split",
        "--account-for-loss-in-pipeline-split",
        "--pipeline-model-parallel-size 2",
        "--num-virtual-stages-per-pipeline-rank 2",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "model shape",
        "negative pipeline size",
        "--pipeline-model-parallel-size -1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p("model shape", "xavier init", "--init-method-xavier-uniform", on=ANY),
    _p("model shape", "expert tensor parallel 0", "--expert-tensor-parallel-size 0", on=MOE),
    # -- attention heads and query groups over tensor-parallel ranks -----------------------
    _p(
        "attention",
        "heads over TP",
        "--num-attention-heads 6",
        "--kv-channels 64",
        "--tensor-model-parallel-size 4",
        on=ANY,
    ),
    _p(
        "attention",
        "heads over TP",
        "--num-attention-heads 10",
        "--kv-channels 64",
        "--tensor-model-parallel-size 4",
        "!--sequence-parallel",
        on=ANY,
    ),
    _p(
        "attention",
        "heads over TP (control)",
        "--num-attention-heads 12",
        "--kv-channels 64",
        "--tensor-model-parallel-size 4",
        on=ANY,
    ),
    _p(
        "attention",
        "query groups over TP",
        "--group-query-attention",
        "--num-query-groups 3",
        "--num-attention-heads 12",
        "--kv-channels 64",
        "--tensor-model-parallel-size 2",
        on=ANY,
    ),
    _p(
        "attention",
        "query groups over TP (control)",
        "--group-query-attention",
        "--num-query-groups 1",
        "--tensor-model-parallel-size 2",
        on=ANY,
    ),
    _p(
        "attention",
        "query groups over TP",
        "--num-query-groups 6",
        "--tensor-model-parallel-size 4",
        "--num-attention-heads 12",
        "--kv-channels 64",
        on=("gdn",),
    ),
    # -- gated delta net / DSA / MLA / RoPE ---------------------------------------------------
    _p(
        "attention",
        "gdn heads over TP",
        "--linear-num-key-heads 3",
        "--linear-num-value-heads 6",
        on=("gdn",),
    ),
    _p("attention", "gdn value heads", "--linear-num-value-heads 6", on=("gdn",)),
    _p("attention", "gdn freq", "!--linear-attention-freq", on=("gdn",)),
    _p(
        "attention",
        "gdn heads over TP x CP",
        "--context-parallel-size 2",
        "--linear-num-key-heads 2",
        on=("gdn",),
    ),
    _p("attention", "gdn householder", "--gdp-num-householder 0", on=("gdn",)),
    _p(
        "attention",
        "dsa bias",
        "--experimental-attention-variant dsa",
        "!--disable-bias-linear",
        on=MLA,
    ),
    _p(
        "attention",
        "dsa rope fusion",
        "--experimental-attention-variant dsa",
        "!--no-rope-fusion",
        "--rope-type yarn",
        on=MLA,
    ),
    _p(
        "attention",
        "dsa topk freq",
        "--experimental-attention-variant dsa",
        "--dsa-indexer-topk-freq 0",
        on=MLA,
    ),
    _p(
        "attention",
        "dsa skip offset",
        "--experimental-attention-variant dsa",
        "--dsa-indexer-skip-topk-offset -1",
        on=MLA,
    ),
    _p(
        "attention",
        "dsa cp comm",
        "--experimental-attention-variant dsa",
        "--context-parallel-size 2",
        "--cp-comm-type p2p",
        on=MLA,
    ),
    _p("attention", "dsa (control)", "--experimental-attention-variant dsa", on=MLA),
    _p("attention", "rope type without MLA", "--rope-type yarn", on=("rope",)),
    _p("attention", "rope type rope (control)", "--rope-type rope", on=("rope",)),
    _p("attention", "rope fusion without TE", "TE=none", on=("rope",)),
    _p("attention", "interleaved rope fusion TE", "--rotary-interleaved", "TE=2.2.0", on=("rope",)),
    _p("attention", "interleaved rope fusion (control)", "--rotary-interleaved", on=("rope",)),
    _p("attention", "mla interleaved", "--rotary-interleaved", on=MLA),
    _p("attention", "mla rope fusion rope", "!--no-rope-fusion", "--rope-type rope", on=MLA),
    _p(
        "attention",
        "mla rope fusion yarn (control)",
        "!--no-rope-fusion",
        "--rope-type yarn",
        on=MLA,
    ),
    _p("attention", "mla output gate", "--attention-output-gate", on=MLA),
    _p(
        "attention",
        "mla cache latents",
        "--cache-mla-latents",
        "!--no-rope-fusion",
        "--rope-type yarn",
        on=MLA,
    ),
    _p("attention", "no-rope freq divides", "--no-rope-freq 5", on=("rope",)),
    _p("attention", "no-rope freq (control)", "--no-rope-freq 4", on=("rope",)),
    _p("attention", "no-rope flash decode", "--no-rope-freq 4", "--flash-decode", on=("rope",)),
    _p("attention", "mup base", "--use-mup", "--mup-base-hidden-size -1", on=("dense",)),
    # -- MoE ------------------------------------------------------------------------------------
    _p("moe", "negative experts", "--num-experts -2", "--expert-model-parallel-size 1", on=MOE),
    _p("moe", "expert ffn without experts", "--moe-ffn-hidden-size 256", on=("dense",)),
    _p(
        "moe",
        "expert ffn mixed (control)",
        "--moe-ffn-hidden-size 256",
        "--moe-layer-freq 2",
        on=("dense",),
    ),
    _p("moe", "grouped tensor without grouped gemm", "--moe-use-grouped-tensor", on=MOE),
    _p("moe", "single grouped weight without gemm", "--moe-single-grouped-weight", on=MOE),
    _p(
        "moe",
        "single grouped weight without grouped tensor",
        "--moe-single-grouped-weight",
        "--moe-grouped-gemm",
        on=MOE,
    ),
    _p(
        "moe",
        "single grouped weight (control)",
        "--moe-single-grouped-weight",
        "--moe-grouped-gemm",
        "--moe-use-grouped-tensor",
        on=MOE,
    ),
    _p(
        "moe",
        "single grouped weight old TE",
        "--moe-single-grouped-weight",
        "--moe-grouped-gemm",
        "--moe-use-grouped-tensor",
        "TE=2.13.0",
        on=MOE,
    ),
    _p(
        "moe",
        "single grouped bias without bias",
        "--moe-single-grouped-bias",
        "--moe-grouped-gemm",
        "--moe-use-grouped-tensor",
        "--disable-bias-linear",
        on=MOE,
    ),
    _p(
        "moe",
        "deepep without flex",
        "--moe-enable-deepep",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "deepep and hybridep",
        "--moe-enable-deepep",
        "--moe-token-dispatcher-type flex",
        "--moe-flex-dispatcher-backend hybridep",
        on=MOE,
    ),
    _p(
        "moe",
        "deepep padding",
        "--moe-token-dispatcher-type flex",
        "--moe-expert-capacity-factor 1.0",
        "--moe-pad-expert-input-to-capacity",
        "--moe-router-load-balancing-type aux_loss",
        on=MOE,
    ),
    _p(
        "moe",
        "ncclep without flex",
        "--moe-flex-dispatcher-backend ncclep",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "ncclep grouped tensor",
        "--moe-flex-dispatcher-backend ncclep",
        "--moe-token-dispatcher-type flex",
        "--moe-grouped-gemm",
        "--moe-use-grouped-tensor",
        on=MOE,
    ),
    _p(
        "moe",
        "mxfp8 dispatch without ncclep",
        "--moe-dispatch-fwd-dtype mxfp8",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "mxfp8 combine without fuser",
        "--moe-combine-bwd-dtype mxfp8",
        "--moe-token-dispatcher-type flex",
        "--moe-flex-dispatcher-backend ncclep",
        on=MOE,
    ),
    _p(
        "moe",
        "deprecated sm counts",
        "--moe-deepep-num-sms 20",
        "--moe-hybridep-num-sms 24",
        on=MOE,
    ),
    _p(
        "moe",
        "deprecated sm counts (control)",
        "--moe-deepep-num-sms 20",
        "--moe-hybridep-num-sms 24",
        "--moe-flex-dispatcher-num-sms 16",
        on=MOE,
    ),
    _p("moe", "shared expert size", "--moe-shared-expert-intermediate-size -128", on=MOE),
    _p(
        "moe",
        "shared overlap allgather",
        "--moe-shared-expert-intermediate-size 512",
        "--moe-shared-expert-overlap",
        "--moe-token-dispatcher-type allgather",
        on=MOE,
    ),
    _p(
        "moe",
        "shared overlap (control)",
        "--moe-shared-expert-intermediate-size 512",
        "--moe-shared-expert-overlap",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "aux coeff list",
        "--moe-router-load-balancing-type aux_loss seq_aux_loss",
        "--moe-aux-loss-coeff 0.01",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p(
        "moe",
        "aux coeff list (control)",
        "--moe-router-load-balancing-type aux_loss seq_aux_loss",
        "--moe-aux-loss-coeff 0.01 0.001",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p(
        "moe",
        "capacity with sinkhorn",
        "--moe-expert-capacity-factor 1.0",
        "--moe-router-load-balancing-type sinkhorn",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "pad without capacity",
        "--moe-pad-expert-input-to-capacity",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "pad with negative capacity",
        "--moe-pad-expert-input-to-capacity",
        "--moe-expert-capacity-factor -1",
        "--moe-token-dispatcher-type alltoall",
        "--moe-router-load-balancing-type aux_loss",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p(
        "moe",
        "capacity padding (control)",
        "--moe-pad-expert-input-to-capacity",
        "--moe-expert-capacity-factor 1.5",
        "--moe-token-dispatcher-type alltoall",
        "--moe-router-load-balancing-type aux_loss",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p("moe", "rank capacity deepep", "--moe-expert-rank-capacity-factor 1.2", on=MOE),
    _p(
        "moe",
        "rank capacity hybridep fuser",
        "--moe-expert-rank-capacity-factor 1.2",
        "--moe-token-dispatcher-type flex",
        "--moe-flex-dispatcher-backend hybridep",
        on=MOE,
    ),
    _p(
        "moe",
        "expert bias with ETP",
        "!--disable-bias-linear",
        "!--no-bias-gelu-fusion",
        "--expert-tensor-parallel-size 2",
        on=MOE,
    ),
    _p("moe", "expert bias with TP", "!--disable-bias-linear", "!--no-bias-gelu-fusion", on=MOE),
    _p(
        "moe",
        "router expert bias softmax",
        "--moe-router-enable-expert-bias",
        "--moe-router-score-function softmax",
        "--moe-router-topk 2",
        on=MOE + MLA,
    ),
    _p(
        "moe",
        "router expert bias (control)",
        "--moe-router-enable-expert-bias",
        "--moe-router-score-function sigmoid",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p("moe", "moe fp8 old TE", "TE=1.6.0", on=MLA),
    _p(
        "moe",
        "padding without fp8",
        "--moe-router-padding-for-quantization",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "moe",
        "padding allgather",
        "--moe-router-padding-for-fp8",
        "--fp8-format e4m3",
        "--moe-token-dispatcher-type allgather",
        on=MOE,
    ),
    _p(
        "moe",
        "padding (control)",
        "--moe-router-padding-for-quantization",
        "--moe-token-dispatcher-type alltoall",
        on=MLA,
    ),
    _p(
        "moe",
        "top-1 softmax",
        "--moe-router-topk 1",
        "--moe-router-load-balancing-type aux_loss",
        on=MOE,
    ),
    _p(
        "moe",
        "top-1 pre-softmax (control)",
        "--moe-router-topk 1",
        "--moe-router-pre-softmax",
        "--moe-router-load-balancing-type aux_loss",
        on=MOE,
    ),
    _p(
        "moe",
        "group topk without groups",
        "--moe-router-group-topk 2",
        "--moe-router-topk 2",
        on=MOE,
    ),
    _p("moe", "groups do not divide experts", "--moe-router-num-groups 3", on=MLA),
    _p("moe", "group topk above groups", "--moe-router-group-topk 8", on=MLA),
    _p("moe", "permute fusion without TE", "--moe-permute-fusion", "TE=2.0.0", on=MOE),
    _p("moe", "permute fusion (control)", "--moe-permute-fusion", on=MOE),
    # -- recompute and CPU offloading ---------------------------------------------------------
    _p(
        "recompute",
        "full without method",
        "--recompute-granularity full",
        "--recompute-num-layers 1",
        on=ANY,
    ),
    _p(
        "recompute",
        "full without layers",
        "--recompute-granularity full",
        "--recompute-method uniform",
        on=ANY,
    ),
    _p(
        "recompute",
        "full (control)",
        "--recompute-granularity full",
        "--recompute-method uniform",
        "--recompute-num-layers 1",
        on=ANY,
    ),
    _p(
        "recompute",
        "selective with layers",
        "--recompute-granularity selective",
        "--recompute-num-layers 1",
        on=ANY,
    ),
    _p(
        "recompute",
        "distribute with SP",
        "--recompute-granularity full",
        "--recompute-method uniform",
        "--recompute-num-layers 1",
        "--distribute-saved-activations",
        "--sequence-parallel",
        on=ANY,
    ),
    _p(
        "recompute",
        "moe_act without grouped gemm",
        "--recompute-granularity selective",
        "--recompute-modules moe_act",
        on=MOE,
    ),
    _p(
        "recompute",
        "mla_up_proj without MLA",
        "--recompute-granularity selective",
        "--recompute-modules mla_up_proj",
        on=ANY,
    ),
    _p(
        "recompute",
        "mla_up_proj (control)",
        "--recompute-granularity selective",
        "--recompute-modules mla_up_proj",
        on=MLA,
    ),
    _p(
        "recompute",
        "gdn_norm_out without GDN",
        "--recompute-granularity selective",
        "--recompute-modules gdn_norm_out",
        on=ANY,
    ),
    _p(
        "recompute",
        "shared experts with overlap",
        "--recompute-granularity selective",
        "--recompute-modules shared_experts",
        "--moe-shared-expert-intermediate-size 512",
        "--moe-shared-expert-overlap",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "recompute",
        "fp8 layernorm delayed",
        "--recompute-granularity selective",
        "--recompute-modules layernorm",
        "--fp8-format hybrid",
        "--fp8-recipe delayed",
        on=ANY,
    ),
    _p(
        "recompute",
        "fp8 layernorm old TE",
        "--recompute-granularity selective",
        "--recompute-modules layernorm",
        "--fp8-format hybrid",
        "--fp8-recipe tensorwise",
        "TE=2.5.0",
        on=ANY,
    ),
    _p(
        "recompute",
        "fp8 layernorm (control)",
        "--recompute-granularity selective",
        "--recompute-modules layernorm",
        "--fp8-format hybrid",
        "--fp8-recipe tensorwise",
        on=ANY,
    ),
    _p(
        "recompute",
        "moe layer recompute full",
        "--moe-layer-recompute",
        "--recompute-granularity full",
        "--recompute-method uniform",
        "--recompute-num-layers 1",
        on=MOE,
    ),
    _p("recompute", "cpu offloading too many", "--cpu-offloading-num-layers 40", on=ANY),
    _p(
        "recompute",
        "cpu offloading with recompute",
        "--cpu-offloading-num-layers 1",
        "--recompute-activations",
        on=ANY,
    ),
    _p(
        "recompute",
        "cpu offloading (control)",
        "--cpu-offloading-num-layers 1",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=ANY,
    ),
    # -- fine-grained activation offloading and paged stash --------------------------------
    _p("offloading", "no modules", OFFLOAD_ENV, "--fine-grained-activation-offloading", on=ANY),
    _p(
        "offloading",
        "attn_proj alone",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules attn_proj",
        on=ANY,
    ),
    _p(
        "offloading",
        "offload (control)",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn attn_proj",
        on=ANY,
    ),
    _p(
        "offloading",
        "unknown module",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules mlp",
        on=ANY,
    ),
    _p(
        "offloading",
        "with cpu offloading",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn",
        "--cpu-offloading-num-layers 1",
        on=ANY,
    ),
    _p(
        "offloading",
        "inside recomputed moe",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules expert_fc1",
        "--recompute-granularity selective",
        "--recompute-modules moe",
        on=MOE,
    ),
    _p(
        "offloading",
        "fraction",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn",
        "--activation-offload-fraction 1.5",
        on=ANY,
    ),
    _p(
        "offloading",
        "min size",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn",
        "--min-offloaded-tensor-size -1",
        on=ANY,
    ),
    _p(
        "offloading",
        "fused group mlp without fuser",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules fused_group_mlp",
        on=MOE,
    ),
    _p(
        "offloading",
        "fused group mlp with fc1",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules fused_group_mlp expert_fc1",
        "--use-transformer-engine-op-fuser",
        on=MOE,
    ),
    _p("offloading", "paged stash without rank capacity", "--moe-paged-stash", on=MOE),
    _p(
        "offloading",
        "paged stash offload",
        "--moe-paged-stash",
        "--moe-expert-rank-capacity-factor 1.2",
        "--moe-token-dispatcher-type flex",
        "--moe-flex-dispatcher-backend ncclep",
        "--offload-modules expert_fc1",
        on=MOE,
    ),
    _p(
        "offloading",
        "gdp chunk states",
        "--gdp-cutedsl-kernel",
        "--gdp-num-chunk-states-to-recompute 100",
        on=ANY,
    ),
    _p("offloading", "gtp opt-in module", "--gtp-remat-opt-in-modules attention", on=ANY),
    # -- FP8 / FP4 -------------------------------------------------------------------------------
    _p(
        "precision",
        "bf16 edges delayed",
        "--fp8-format hybrid",
        "--fp8-recipe delayed",
        "--first-last-layers-bf16",
        on=ANY,
    ),
    _p(
        "precision",
        "bf16 edges too many",
        "--fp8-format hybrid",
        "--fp8-recipe tensorwise",
        "--first-last-layers-bf16",
        "--num-layers-at-start-in-bf16 20",
        on=ANY,
    ),
    _p(
        "precision",
        "bf16 edges (control)",
        "--fp8-format hybrid",
        "--fp8-recipe tensorwise",
        "--first-last-layers-bf16",
        "--num-layers-at-start-in-bf16 1",
        on=ANY,
    ),
    _p("precision", "custom recipe", "--fp8-format e4m3", "--fp8-recipe custom", on=ANY),
    _p("precision", "fp8 output proj", "--fp8-output-proj", on=ANY),
    _p(
        "precision",
        "fp8 output proj recipe",
        "--fp8-output-proj",
        "--fp8-format e4m3",
        "--fp8-recipe tensorwise",
        on=ANY,
    ),
    _p(
        "precision",
        "fp8 output proj (control)",
        "--fp8-output-proj",
        "--fp8-format e4m3",
        "--fp8-recipe mxfp8",
        on=ANY,
    ),
    _p("precision", "fp8 param gather", "--fp8-param-gather", on=ANY),
    _p("precision", "fp4 param gather", "--fp4-param-gather", on=ANY),
    _p("precision", "fp4 and fp8", "--fp4-format e2m1", "--fp8-format e4m3", on=ANY),
    _p("precision", "fp4 custom", "--fp4-format e2m1", "--fp4-recipe custom", on=ANY),
    # -- expert-parallel overlap -------------------------------------------------------------
    _p(
        "overlap",
        "ep overlap without EP",
        "--overlap-moe-expert-parallel-comm",
        "--expert-model-parallel-size 1",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap allgather",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type allgather",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap (control)",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap full recompute",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        "--recompute-granularity full",
        "--recompute-method uniform",
        "--recompute-num-layers 1",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap moe recompute",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        "--moe-layer-recompute",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap pp without vpp",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        "--pipeline-model-parallel-size 2",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap shared overlap",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        "--moe-shared-expert-intermediate-size 512",
        "--moe-shared-expert-overlap",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap mtp",
        "--overlap-moe-expert-parallel-comm",
        "--mtp-num-layers 2",
        on=MLA,
    ),
    _p(
        "overlap",
        "ep overlap fp32",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        "!--bf16",
        on=MOE,
    ),
    _p(
        "overlap",
        "ep overlap te graph moe",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules moe",
        on=MOE,
    ),
    _p("overlap", "delay wgrad", "--delay-wgrad-compute", on=MOE),
    _p(
        "overlap",
        "dispatch wgrad with ep overlap",
        "--overlap-dispatch-backward-with-experts-wgrad",
        "--overlap-moe-expert-parallel-comm",
        "--moe-token-dispatcher-type alltoall",
        on=MOE,
    ),
    _p(
        "overlap",
        "dispatch wgrad old TE",
        "--overlap-dispatch-backward-with-experts-wgrad",
        "TE=2.2.0",
        on=MOE,
    ),
    _p("overlap", "early release", "--ep-overlap-early-attn-memory-release", on=MOE),
    # -- activations and fusions -------------------------------------------------------------
    _p(
        "fusions",
        "squared relu fused",
        "--squared-relu",
        "!--disable-bias-linear",
        "!--no-bias-gelu-fusion",
        on=ANY,
    ),
    _p("fusions", "squared relu (control)", "--squared-relu", "--no-bias-gelu-fusion", on=ANY),
    _p("fusions", "swiglu and squared relu", "--swiglu", "--squared-relu", on=ANY),
    _p("fusions", "swiglu and quick geglu", "--swiglu", "--quick-geglu", on=ANY),
    _p("fusions", "glu offset", "--swiglu", "--glu-linear-offset 1.0", on=ANY),
    _p(
        "fusions",
        "glu offset quick geglu (control)",
        "--quick-geglu",
        "--glu-linear-offset 1.0",
        on=ANY,
    ),
    _p("fusions", "te activation with fusion", "--use-te-activation-func", "--swiglu", on=ANY),
    _p(
        "fusions",
        "te activation squared relu",
        "--use-te-activation-func",
        "--squared-relu",
        "--no-bias-gelu-fusion",
        on=ANY,
    ),
    _p(
        "fusions",
        "te activation (control)",
        "--use-te-activation-func",
        "--swiglu",
        "--no-bias-swiglu-fusion",
        on=ANY,
    ),
    _p(
        "fusions",
        "fused residual rmsnorm",
        "--fused-residual-rmsnorm",
        "--normalization LayerNorm",
        on=ANY,
    ),
    _p(
        "fusions",
        "clamp dense",
        "--swiglu",
        "--activation-func-clamp-value 7.0",
        on=("dense",),
        newer=True,
    ),
    _p(
        "fusions",
        "clamp negative",
        "--swiglu",
        "--activation-func-clamp-value -1.0",
        on=MOE,
        newer=True,
    ),
    _p(
        "fusions",
        "clamp (control)",
        "--swiglu",
        "--activation-func-clamp-value 7.0",
        on=MOE,
        newer=True,
    ),
    # -- pipeline stages -----------------------------------------------------------------------
    _p(
        "pipeline",
        "empty first stage",
        "--decoder-first-pipeline-num-layers 0",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "uneven with accounting",
        "--decoder-first-pipeline-num-layers 2",
        "--account-for-embedding-in-pipeline-split",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "uneven middle mismatch",
        "--decoder-first-pipeline-num-layers 5",
        "--decoder-last-pipeline-num-layers 6",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "uneven middle split",
        "--decoder-first-pipeline-num-layers 3",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "uneven (control)",
        "--decoder-first-pipeline-num-layers 3",
        "--decoder-last-pipeline-num-layers 3",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "uneven vpp",
        "--decoder-first-pipeline-num-layers 3",
        "--decoder-last-pipeline-num-layers 3",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        "--num-virtual-stages-per-pipeline-rank 2",
        on=("dense",),
    ),
    _p("pipeline", "accounting split", "--account-for-loss-in-pipeline-split", on=("dense",)),
    _p(
        "pipeline",
        "accounting (control)",
        "--account-for-loss-in-pipeline-split",
        "--account-for-embedding-in-pipeline-split",
        "--num-layers 14",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "layout layer count",
        "--pipeline-model-parallel-layout Ett|tt|tt|ttL",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "layout no loss",
        "--pipeline-model-parallel-layout Etttt|tttt|tttt|tttt",
        "--pipeline-model-parallel-size 4",
        "--num-layers 16",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "layout (control)",
        "--pipeline-model-parallel-layout Ettt|ttt|ttt|tttL",
        "--pipeline-model-parallel-size 4",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "layout with uneven",
        "--pipeline-model-parallel-layout Ettt|ttt|ttt|tttL",
        "--pipeline-model-parallel-size 4",
        "--decoder-first-pipeline-num-layers 3",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "pipeline",
        "warmup flush",
        "--overlap-p2p-communication-warmup-flush",
        "--no-overlap-p2p-communication",
        on=("dense",),
    ),
    _p("pipeline", "defer embedding wgrad", "--defer-embedding-wgrad-compute", on=("dense",)),
    _p(
        "pipeline",
        "defer embedding wgrad pp1",
        "--defer-embedding-wgrad-compute",
        "!--no-gradient-accumulation-fusion",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    # -- CUDA graphs ---------------------------------------------------------------------------
    _p(
        "cuda graphs",
        "full iteration modules",
        GRAPH_ENV,
        "--cuda-graph-impl full_iteration",
        "--cuda-graph-modules attn",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "moe and router",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules moe moe_router",
        on=MOE,
    ),
    _p(
        "cuda graphs",
        "moe graph on dense",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules moe_router",
        on=("dense",),
    ),
    _p(
        "cuda graphs",
        "mlp graph all moe",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules attn mlp",
        on=MOE,
    ),
    _p(
        "cuda graphs",
        "moe graph dropless",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules moe",
        on=MOE,
    ),
    _p(
        "cuda graphs",
        "router graph (control)",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules attn moe_router",
        on=MOE,
    ),
    _p(
        "cuda graphs",
        "preprocess without router",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cuda-graph-modules moe_preprocess",
        on=MOE,
    ),
    _p(
        "cuda graphs",
        "full recompute te graph",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--recompute-granularity full",
        "--recompute-method uniform",
        "--recompute-num-layers 1",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "dropout graphed recompute",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--recompute-activations",
        "--attention-dropout 0.1",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "dropout graphed recompute (control)",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--recompute-activations",
        "--attention-dropout 0.0",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "local offload core_attn",
        GRAPH_ENV,
        "--cuda-graph-impl local",
        "--cuda-graph-modules attn",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "te offload warmup",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        OFFLOAD_ENV,
        "--fine-grained-activation-offloading",
        "--offload-modules core_attn",
        "--cuda-graph-warmup-steps 0",
        on=ANY,
    ),
    _p(
        "cuda graphs",
        "cpu offloading graph",
        GRAPH_ENV,
        "--cuda-graph-impl transformer_engine",
        "--cpu-offloading-num-layers 1",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=ANY,
    ),
    # -- inference-only options ----------------------------------------------------------------
    _p(
        "inference",
        "inference optimized moe",
        "--transformer-impl inference_optimized",
        "--normalization RMSNorm",
        on=MOE,
    ),
    _p(
        "inference",
        "inference optimized layernorm",
        "--transformer-impl inference_optimized",
        on=("dense",),
    ),
    _p(
        "inference",
        "inference optimized bias",
        "--transformer-impl inference_optimized",
        "--normalization RMSNorm",
        "!--disable-bias-linear",
        on=("dense",),
    ),
    _p("inference", "fuse tp communication", "--inference-fuse-tp-communication", on=ANY),
    _p("inference", "disable nvls kernels", "--inference-disable-triton-nvls-kernels", on=ANY),
    # -- batch invariance ----------------------------------------------------------------------
    _p("batch invariance", "batch invariant backend", "--batch-invariant-mode", on=ANY),
    _p(
        "batch invariance",
        "batch invariant version",
        "--batch-invariant-mode",
        "--attention-backend flash",
        "--attention-dropout 0.0",
        on=ANY,
    ),
    _p(
        "batch invariance",
        "batch invariant moe",
        "--batch-invariant-mode",
        "--attention-backend flash",
        "--flash-attention-version 3",
        "--attention-dropout 0.0",
        "--moe-token-dispatcher-type allgather",
        on=MOE,
        newer=True,
    ),
    # -- parallelism ---------------------------------------------------------------------------
    _p("parallelism", "weight shards", "--tensor-parallel-num-weight-shards 3", on=("moe",)),
    _p(
        "parallelism",
        "weight shards below tp",
        "--tensor-parallel-num-weight-shards 1",
        on=("moe",),
    ),
    _p(
        "parallelism",
        "cp comm per layer",
        "--context-parallel-size 2",
        "--cp-comm-type p2p a2a",
        on=("dense",),
    ),
    _p(
        "parallelism",
        "symmetric all-reduce TE",
        "--symmetric-ar-type two_shot",
        "TE=2.2.0",
        on=("dense",),
    ),
    # -- hyper-connections and MTP -------------------------------------------------------------
    _p("hyper-connections", "mtp hsm", "--mtp-hsm", "--mtp-num-layers 1", on=MLA),
    _p("hyper-connections", "mtp hsm (control)", "--mtp-hsm", "--mtp-num-layers 2", on=MLA),
    _p(
        "hyper-connections",
        "mhc with mtp",
        "--enable-mhc-connections",
        "--mtp-num-layers 1",
        on=MLA,
    ),
    _p("hyper-connections", "mhc with pp", "--enable-mhc-connections", on=("dense",)),
    _p(
        "hyper-connections",
        "mhc (control)",
        "--enable-mhc-connections",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "hyper-connections",
        "mhc fp32 residual",
        "--enable-mhc-connections",
        "--fp32-residual-connection",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "hyper-connections",
        "mhc sinkhorn",
        "--enable-mhc-connections",
        "--mhc-sinkhorn-iterations 0",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
    _p(
        "hyper-connections",
        "mhc recompute without mhc",
        "--recompute-granularity selective",
        "--recompute-modules mhc",
        on=ANY,
    ),
    _p(
        "hyper-connections",
        "mhc recompute with mlp",
        "--enable-mhc-connections",
        "--recompute-granularity selective",
        "--recompute-modules mhc mlp",
        "--pipeline-model-parallel-size 1",
        "!--num-layers-per-virtual-pipeline-stage",
        on=("dense",),
    ),
)
