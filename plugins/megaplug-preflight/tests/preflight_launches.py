"""Resolve small launches with every installed plugin, pre-flight included, for a stated cluster."""

from __future__ import annotations

from typing import Any

import megaplug

DENSE = ["--num-layers", "8", "--hidden-size", "128", "--num-attention-heads", "8",
         "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
         "--train-iters", "10", "--lr", "1e-4", "--bf16"]
MOE = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
       "alltoall", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
#: Multi-latent attention with RoPE fusion on (Megatron's default), and with it off.
MLA_FUSED = ["--multi-latent-attention", "--position-embedding-type", "rope",
             "--normalization", "RMSNorm", "--q-lora-rank", "64", "--kv-lora-rank", "32",
             "--qk-head-dim", "16", "--qk-pos-emb-head-dim", "16", "--v-head-dim", "16"]
MLA = [*MLA_FUSED, "--no-rope-fusion"]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
           "NVTE_CPU_OFFLOAD_V1": "1"}
CLUSTER = {"transformer_engine": "2.17.1"}


def target(packages: dict[str, Any] | None = None,
           capability: tuple[int, int] | None = (9, 0)) -> megaplug.TargetEnvironment:
    return megaplug.TargetEnvironment(packages=dict(CLUSTER if packages is None else packages),
                                      device_capability=capability)


def problems(argv: list[str], *, environ: dict[str, str] | None = None,
             packages: dict[str, Any] | None = None) -> list[megaplug.Problem]:
    """Every problem megaplug reports for ``DENSE + argv`` (an empty list when it resolves)."""
    try:
        megaplug.resolve([*DENSE, *argv], environ=dict(ENVIRON if environ is None else environ),
                         target=target(packages))
    except megaplug.ConfigError as exc:
        return list(exc.problems)
    return []


def preflight_problems(argv: list[str], **kwargs: Any) -> list[megaplug.Problem]:
    """Pre-flight's problems, after making sure no other plugin objects to the launch."""
    found = problems(argv, **kwargs)
    others = [str(p) for p in found if p.plugin != "preflight"]
    assert not others, f"the launch is not valid for validate_args: {others}"
    return [p for p in found if p.plugin == "preflight"]


#: The ending of every pre-flight problem's message (``_report.reject`` adds it).
AT_MODEL_BUILD = "; Megatron would raise this when building the model"


def every_problem(argv: list[str], packages: dict[str, Any] | None = None, *,
                  base: list[str] = DENSE, capability: tuple[int, int] | None = (9, 0),
                  environ: dict[str, str] | None = None,
                  config_files: tuple[Any, ...] = ()) -> list[tuple]:
    """Every problem of ``base + argv`` as (plugin, message, flags, hint), each pre-flight
    message without its common ending (an empty list when the launch resolves)."""
    try:
        megaplug.resolve([*base, *argv], environ={**ENVIRON, **(environ or {})},
                         target=target(packages, capability),
                         config_files=[str(f) for f in config_files])
    except megaplug.ConfigError as error:
        return listed(error.problems)
    return []


def listed(problems: list[Any]) -> list[tuple]:
    """Problems as (plugin, message, flags, hint), each pre-flight message without its common
    ending (which every one of them must have)."""
    assert all(p.message.endswith(AT_MODEL_BUILD) for p in problems if p.plugin == "preflight")
    return [(p.plugin, p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
            for p in problems]


def pre(message: str, flags: tuple[str, ...], hint: str) -> tuple:
    """A pre-flight problem as :func:`every_problem` lists it."""
    return ("preflight", message, flags, hint)
