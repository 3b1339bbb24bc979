"""Fused kernels, numerics checks and deterministic mode."""

from __future__ import annotations


from megaplug import Draft

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

#: Settings deterministic mode cannot honour, with the value it needs (read via config.get,
#: since some belong to other plugins).
#: (Flash attention is deliberately absent: Megatron vouches for TE's as deterministic.)
DETERMINISM_REQUIREMENTS: tuple[tuple[str, Any], ...] = (
    ("cross_entropy_loss_fusion", False),
    ("tp_comm_overlap", False),
)

#: NCCL algorithm tokens Megatron has verified to reduce bit-exactly (``Tree`` is not: its
#: reduction order varies between runs).
DETERMINISTIC_NCCL_ALGOS = ("Ring", "CollnetDirect", "CollnetChain", "^NVLS")

#: Before Megatron 0.19 deterministic mode refused flash attention and cross-entropy fusion,
#: and wanted NCCL_ALGO set to exactly one of these (Tree included).
EARLY_DETERMINISM_RELEASE_END = "0.19.0"
EARLY_DETERMINISM_REQUIREMENTS: tuple[tuple[str, Any], ...] = (
    ("use_flash_attn", False),
    ("cross_entropy_loss_fusion", False),
)
EARLY_DETERMINISTIC_NCCL_ALGOS = ("Tree", "Ring", "CollnetDirect", "CollnetChain", "^NVLS")

#: Environment variables with a fixed set of deterministic values (unset is fine).
DETERMINISTIC_ENV_VALUES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("NVTE_ALLOW_NONDETERMINISTIC_ALGO", ("0",)),
    ("CUBLAS_WORKSPACE_CONFIG", (":4096:8", ":16:8")),
)


def derive_bias_gelu_fusion(config: Draft) -> None:
    """Without linear biases there is no bias to fuse into GeLU."""
    if config.bias_gelu_fusion and not config.get("add_bias_linear", True):
        config.set("bias_gelu_fusion", False, reason="--disable-bias-linear leaves no bias to fuse",
                   inputs=("add_bias_linear",))


def effective_position_embedding_type(config: Draft) -> Any:
    """The position embedding type after the retired --use-rotary-position-embeddings switch."""
    if config.get("use_rotary_position_embeddings"):
        return "rope"
    return config.get("position_embedding_type", "learned_absolute")


def derive_rope_fusion(config: Draft) -> None:
    """The fused rotary kernel applies only to plain RoPE."""
    if config.apply_rope_fusion and effective_position_embedding_type(config) != "rope":
        config.set("apply_rope_fusion", False, reason="position embeddings are not RoPE",
                   inputs=("position_embedding_type",))


def derive_persist_layer_norm(config: Draft) -> None:
    """The persistent layer-norm kernel needs torch >= 1.11 (only checked when torch is known)."""
    version = config.env.package_version("torch")
    if version is None or config.no_persist_layer_norm:
        return
    if not config.env.version_at_least("torch", "1.11"):
        config.warn(f"torch {version} has no persistent fused layer norm; using "
                    "--no-persist-layer-norm", flags=("no_persist_layer_norm",))
        config.set("no_persist_layer_norm", True, reason=f"torch {version} < 1.11")


def derive_dataloader_type(config: Draft) -> None:
    """Without a choice, data is read in a single pass."""
    if config.dataloader_type is None:
        config.set("dataloader_type", "single", reason="the single-pass loader is the default")


def derive_nan_check(config: Draft) -> None:
    """NaN checks are off when NaNs are expected (dynamic loss scaling) or meaningless."""
    if not config.check_for_nan_in_loss_and_grad:
        return
    if config.get("fp16") and not config.get("loss_scale"):
        config.warn("turning off the NaN check: dynamic loss scaling uses NaN gradients as a "
                    "signal", flags=("check_for_nan_in_loss_and_grad", "fp16"))
        config.set("check_for_nan_in_loss_and_grad", False,
                   reason="fp16 with dynamic loss scaling", inputs=("fp16", "loss_scale"))
    elif config.get("fake_process_group"):
        config.warn("turning off the NaN check for the fake process group",
                    flags=("check_for_nan_in_loss_and_grad", "fake_process_group"))
        config.set("check_for_nan_in_loss_and_grad", False, reason="fake process group",
                   inputs=("fake_process_group",))


def check_te_cross_entropy(config: Draft) -> None:
    """Transformer Engine's fused cross entropy is stable only from TE 2.19 on. Megatron
    refuses it outright from 0.18 through main (before 0.18 it takes it); the seed's newer
    revision takes it with TE 2.19."""
    if not (config.cross_entropy_loss_fusion and config.cross_entropy_fusion_impl == "te"):
        return
    env = config.env
    if env.megatron.before("0.18.2"):  # 0.18.2 added the refusal
        return
    if not env.megatron.at_least("seed"):
        config.error("Transformer Engine cross entropy loss fusion (--cross-entropy-fusion-impl "
                     f"te) is disabled in Megatron {env.release_line('megatron_core')} due to "
                     "stability issues",
                     flags=("cross_entropy_fusion_impl", "cross_entropy_loss_fusion"),
                     hint="use --cross-entropy-fusion-impl native, or drop "
                          "--cross-entropy-loss-fusion")
        return
    if env.version_at_least("transformer_engine", "2.19.0"):
        return
    found = env.package_version("transformer_engine") or "not installed"
    # "Transformer Engine cross entropy loss fusion" is the phrase Megatron's message and its
    # tests use for this refusal
    config.error("Transformer Engine cross entropy loss fusion (--cross-entropy-fusion-impl te) "
                 f"needs Transformer Engine >= 2.19 (earlier versions are unstable); "
                 f"found {found}",
                 flags=("cross_entropy_fusion_impl", "cross_entropy_loss_fusion"),
                 hint="use --cross-entropy-fusion-impl native, or drop "
                      "--cross-entropy-loss-fusion")


def check_deterministic_mode(config: Draft) -> None:
    """Deterministic mode rules out kernels and overlaps whose results vary run to run."""
    if not config.deterministic_mode:
        return
    early = config.env.megatron.before(EARLY_DETERMINISM_RELEASE_END)
    required = EARLY_DETERMINISM_REQUIREMENTS if early else DETERMINISM_REQUIREMENTS
    violations = [(dest, wanted, config.get(dest)) for dest, wanted in required
                  if config.get(dest, wanted) != wanted]
    if violations:
        listed = ", ".join(f"{dest}={wanted} (got {got})" for dest, wanted, got in violations)
        flags = [dest for dest, _, _ in violations]
        config.error(f"--deterministic-mode requires: {listed}",
                     flags=("deterministic_mode", *flags),
                     hint="turn off " + ", ".join(config.spelling(f) for f in flags)
                          + ", or drop --deterministic-mode")
    if early:
        _check_early_nccl_algo(config)
    else:
        check_deterministic_environment(config)


def _check_early_nccl_algo(config: Draft) -> None:
    """Megatron before 0.19 needs NCCL_ALGO set, to one algorithm it lists."""
    algo = config.env.getenv("NCCL_ALGO")
    if algo not in EARLY_DETERMINISTIC_NCCL_ALGOS:
        shown = "unset" if algo is None else f"{algo!r}"
        config.error(f"--deterministic-mode needs NCCL_ALGO set to one of "
                     f"{', '.join(EARLY_DETERMINISTIC_NCCL_ALGOS)} in Megatron "
                     f"{config.env.release_line('megatron_core')} (it is {shown})",
                     flags=("deterministic_mode", "NCCL_ALGO"),
                     hint="export NCCL_ALGO=Ring, or drop --deterministic-mode")


def check_deterministic_environment(config: Draft) -> None:
    """Deterministic mode refuses launcher settings that make NCCL, cuBLAS, Transformer
    Engine or Mamba kernels non-reproducible (unset variables get safe values later)."""
    algo = config.env.getenv("NCCL_ALGO")
    if algo is not None:
        tokens = [token.strip() for token in algo.split(",") if token.strip()]
        if not tokens or any(token not in DETERMINISTIC_NCCL_ALGOS for token in tokens):
            config.error(f"NCCL_ALGO={algo!r} is not a deterministic NCCL algorithm choice",
                         flags=("deterministic_mode",),
                         hint=f"set NCCL_ALGO to one of {', '.join(DETERMINISTIC_NCCL_ALGOS)} "
                              "(or leave it unset), or drop --deterministic-mode")
    for name, accepted in DETERMINISTIC_ENV_VALUES:
        value = config.env.getenv(name)
        if value is not None and value not in accepted:
            config.error(f"{name}={value!r} is not a deterministic setting",
                         flags=("deterministic_mode",),
                         hint=f"set {name} to {' or '.join(accepted)} (or leave it unset), "
                              "or drop --deterministic-mode")
    mamba = config.env.getenv("MAMBA_DETERMINISTIC")
    if mamba and not mamba.startswith("1"):
        config.error(f"MAMBA_DETERMINISTIC={mamba!r} turns off Mamba's deterministic kernels",
                     flags=("deterministic_mode",),
                     hint="unset MAMBA_DETERMINISTIC or set it to 1")


DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_nan_check,
    derive_dataloader_type,
    derive_persist_layer_norm,
)

# the fusions run after schedule.DERIVE, in the order the plugin has always derived them
DERIVE_FUSIONS: tuple[Callable[[Draft], None], ...] = (
    derive_bias_gelu_fusion,
    derive_rope_fusion,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_te_cross_entropy,
    check_deterministic_mode,
)
