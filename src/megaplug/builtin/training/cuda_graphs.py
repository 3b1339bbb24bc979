"""CUDA graphs: retired switches, module-list normalization and capture requirements."""

from __future__ import annotations


from megaplug import Draft

from .enums import CudaGraphModule, CudaGraphScope

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Optional

#: Retired module spellings, and the implementations each may be combined with:
#: ``full_iteration`` is ``--cuda-graph-impl full_iteration`` now; ``full_iteration_inference``
#: is an inference CUDA-graph scope, migrated by the plugin that owns the scope.
RETIRED_MODULES: dict[str, tuple[str, ...]] = {
    "full_iteration": ("none", "local", "full_iteration"),
    "full_iteration_inference": ("none", "local"),
}


def normalize_retired_switches(config: Draft) -> None:
    """--enable-cuda-graph / --external-cuda-graph become --cuda-graph-impl local / transformer_engine.

    A switch that was used leaves the result, as Megatron deletes it once translated; an
    unused one stays (False).
    """  # noqa: E501
    local, external = config.enable_cuda_graph, config.external_cuda_graph
    if config.env.megatron.before(IMPL_FLAG_RELEASE):
        _read_switches_as_impl(config, local, external)
        return
    if (local or external) and config.cuda_graph_impl != "none":
        used = "--enable-cuda-graph" if local else "--external-cuda-graph"
        config.error(f"{used} cannot be combined with --cuda-graph-impl {config.cuda_graph_impl}",
                     flags=(used, "cuda_graph_impl"),
                     hint=f"drop {used}; --cuda-graph-impl alone chooses the implementation")
    elif local and external:
        config.error("--enable-cuda-graph and --external-cuda-graph cannot both be set",
                     flags=("enable_cuda_graph", "external_cuda_graph"),
                     hint="use --cuda-graph-impl local or --cuda-graph-impl transformer_engine")
    elif local or external:
        used, impl = ("--enable-cuda-graph", "local") if local else \
            ("--external-cuda-graph", "transformer_engine")
        config.warn(f"{used} is deprecated; use --cuda-graph-impl {impl}", flags=(used,))
        switch = "enable_cuda_graph" if local else "external_cuda_graph"
        config.set("cuda_graph_impl", impl, reason=f"{used} is retired", inputs=(switch,))
        config.discard(switch)


#: The first Megatron release line with --cuda-graph-impl; before it the two switches are
#: its settings, kept on the namespace (the rules here read the implementation they mean).
IMPL_FLAG_RELEASE = "0.15.0"


def _read_switches_as_impl(config: Draft, local: bool, external: bool) -> None:
    if local and external and config.env.megatron.at_least("0.14.0"):
        config.error("--enable-cuda-graph and --external-cuda-graph cannot both be set",
                     flags=("enable_cuda_graph", "external_cuda_graph"),
                     hint="keep one of them")
    elif local or external:
        switch = "enable_cuda_graph" if local else "external_cuda_graph"
        config.set("cuda_graph_impl", "local" if local else "transformer_engine",
                   reason=f"what {config.spelling(switch)} means", inputs=(switch,))


def normalize_retired_scope_flag(config: Draft) -> None:
    """--cuda-graph-scope is the old spelling of --cuda-graph-modules.

    From 0.18 on; before, it is the line's own setting (:func:`normalize_line_scope`)."""
    scope = config.cuda_graph_scope_deprecated
    if config.env.megatron.before(MODULES_FLAG_RELEASE):
        scope = None
    if scope is not None:
        if config.cuda_graph_modules:
            config.error("--cuda-graph-scope and --cuda-graph-modules cannot be used together",
                         flags=("--cuda-graph-scope", "cuda_graph_modules"),
                         hint="keep --cuda-graph-modules; --cuda-graph-scope is its old name")
        else:
            config.warn("--cuda-graph-scope is deprecated; use --cuda-graph-modules",
                        flags=("--cuda-graph-scope",))
            config.set("cuda_graph_modules", list(scope), reason="--cuda-graph-scope is retired",
                       inputs=("cuda_graph_scope_deprecated",))
    config.discard("cuda_graph_scope_deprecated")


#: The first Megatron release line with --cuda-graph-modules; before it --cuda-graph-scope
#: (``cuda_graph_scope``) is the line's own setting: one word up to 0.15, a list of
#: CudaGraphScope members in 0.16 and 0.17.
MODULES_FLAG_RELEASE = "0.18.0"


def normalize_line_scope(config: Draft) -> None:
    """--cuda-graph-scope as the release lines up to 0.17 keep it.

    Up to 0.17, ``cuda_graph_scope`` as that release keeps it: 0.16 and 0.17 parse its
    words into CudaGraphScope members and rewrite a lone ``full`` (deprecated) to the empty
    list. The modules it names reach the rules that read ``cuda_graph_modules``."""
    env = config.env
    if not env.megatron.before(MODULES_FLAG_RELEASE) or "cuda_graph_scope" not in config:
        return
    raw = config.cuda_graph_scope
    if env.megatron.at_least("0.16.0"):
        raw = _line_scope_members(config, raw)
        if raw is None:
            return
    words = [raw] if isinstance(raw, str) else [getattr(item, "name", item) for item in raw]
    modules = [CudaGraphModule[word] for word in words if word in CudaGraphModule.__members__]
    if modules:
        config.set("cuda_graph_modules", modules, reason="what --cuda-graph-scope captures",
                   inputs=("cuda_graph_scope",))


def _line_scope_members(config: Draft, raw: list[Any]) -> list[Any] | None:
    """0.16 / 0.17: the scope's words as CudaGraphScope members (None: a word is refused)."""
    known = [m.name for m in CudaGraphScope
             if m.name != "full_iteration_inference" or config.env.megatron.at_least("0.17.0")]
    members: list[Any] = []
    for word in raw:
        name = getattr(word, "name", word)
        if name != "full" and name not in known:
            config.error(f"--cuda-graph-scope: invalid choice {name!r} (choose from "
                         f"{', '.join(known)})", flags=("cuda_graph_scope",),
                         hint="use one of the listed scopes")
            return None
        members.append(name if name == "full" else CudaGraphScope[name])
    if "full" in members:
        if members != ["full"]:
            config.error("--cuda-graph-scope full cannot be used with other scopes",
                         flags=("cuda_graph_scope",), hint="use full alone, or better none")
            return None
        config.warn("--cuda-graph-scope full is deprecated; an empty scope captures the whole "
                    "layer", flags=("cuda_graph_scope",))
        members = []
    if members != raw:
        config.set("cuda_graph_scope", members, reason="the scope's words as CudaGraphScope",
                   inputs=("cuda_graph_scope",))
    return members


def check_line_full_iteration_scope(config: Draft) -> None:
    """Local whole-iteration graphs need the NaN check off (0.14 and 0.17).

    0.14 and 0.17: local whole-iteration graphs (``--cuda-graph-scope full_iteration``)
    need --no-check-for-nan-in-loss-and-grad. (0.15 and 0.16 check them by what runs,
    training or dynamic-batching inference: the inference plugin's rule.)"""
    env = config.env
    if not (env.megatron.between("0.14.0", "0.14.0") or env.megatron.between("0.17.0", "0.17.1")) \
            or "cuda_graph_scope" not in config:
        return
    scope = config.cuda_graph_scope
    full_iteration = scope == "full_iteration" if isinstance(scope, str) else \
        CudaGraphScope.full_iteration in scope
    if config.cuda_graph_impl != "local" or not full_iteration \
            or not _nan_check_before_fake_process_group(config):
        return
    config.error("--cuda-graph-scope full_iteration needs --no-check-for-nan-in-loss-and-grad "
                 f"in Megatron {env.release_line('megatron_core')}",
                 flags=("cuda_graph_scope", "check_for_nan_in_loss_and_grad"),
                 hint="add --no-check-for-nan-in-loss-and-grad")


def _nan_check_before_fake_process_group(config: Draft) -> bool:
    """Whether the NaN check was on before a fake process group turned it off.

    Whether the NaN check is on where Megatron checks whole-iteration graphs against it:
    after fp16 without a loss scale turned it off, before a fake process group does."""
    if not config.get("fake_process_group"):
        return bool(config.check_for_nan_in_loss_and_grad)
    unscaled_fp16 = config.get("fp16") and not config.get("loss_scale")
    return bool(config.given_value("check_for_nan_in_loss_and_grad", True)) and not unscaled_fp16


def check_full_iteration_impl_without_nan_check(config: Draft) -> None:
    """Whole-iteration graphs need the NaN check off (0.18 on).

    Whole-iteration graphs (``--cuda-graph-impl full_iteration``, 0.18 on) cannot check
    the loss and gradients for NaNs in training."""
    if config.cuda_graph_impl == "full_iteration" and _nan_check_before_fake_process_group(config):
        config.error("--cuda-graph-impl full_iteration needs --no-check-for-nan-in-loss-and-grad "
                     "for training", flags=("cuda_graph_impl", "check_for_nan_in_loss_and_grad"),
                     hint="add --no-check-for-nan-in-loss-and-grad")


def check_line_inference_iteration_scope(config: Draft) -> None:
    """FP8 inference iteration graphs need optimized MXFP8 layers (0.17).

    0.17: FP8 with local ``full_iteration_inference`` graphs needs the inference-optimized
    layers and the MXFP8 recipe."""
    if not config.env.megatron.between("0.17.0", "0.17.1") or config.cuda_graph_impl != "local" \
            or CudaGraphScope.full_iteration_inference not in config.cuda_graph_scope \
            or config.get("fp8") is None:
        return
    if config.get("transformer_impl") != "inference_optimized":
        config.error("FP8 with full_iteration_inference CUDA graphs needs --transformer-impl "
                     "inference_optimized in Megatron 0.17",
                     flags=("cuda_graph_scope", "fp8", "transformer_impl"),
                     hint="add --transformer-impl inference_optimized")
    elif config.get("fp8_recipe") != "mxfp8":
        config.error("FP8 with full_iteration_inference CUDA graphs supports only --fp8-recipe "
                     "mxfp8 in Megatron 0.17", flags=("cuda_graph_scope", "fp8_recipe"),
                     hint="use --fp8-recipe mxfp8")


def normalize_module_list(config: Draft) -> None:
    """Turn the module list into CudaGraphModule members, migrating retired spellings."""
    raw = config.cuda_graph_modules or []
    modules, retired, used_full = _split_modules(raw)
    if used_full and len(raw) > 1:
        config.error("--cuda-graph-modules full cannot be combined with other modules",
                     flags=("cuda_graph_modules",),
                     hint="use full alone, or better an empty list, to capture the whole layer")
        return
    if used_full:
        config.warn("--cuda-graph-modules full is deprecated; an empty module list captures the "
                    "whole layer", flags=("cuda_graph_modules",))
    if _retired_modules_fit(config, retired) and "full_iteration" in retired:
        config.warn("--cuda-graph-modules full_iteration is deprecated; setting "
                    "--cuda-graph-impl=full_iteration instead", flags=("cuda_graph_modules",
                                                                         "cuda_graph_impl"))
        config.set("cuda_graph_impl", "full_iteration", reason="retired --cuda-graph-modules "
                   "full_iteration", inputs=("cuda_graph_modules",))
    if modules != config.cuda_graph_modules:
        config.set("cuda_graph_modules", modules, reason="normalized module list",
                   inputs=("cuda_graph_modules",))


def _split_modules(raw: list[Any]) -> tuple[list[CudaGraphModule], list[str], bool]:
    modules: list[CudaGraphModule] = []
    retired: list[str] = []
    used_full = False
    for item in raw:
        if isinstance(item, CudaGraphModule):
            if item not in modules:
                modules.append(item)
        elif item == "full":
            used_full = True
        elif item in RETIRED_MODULES:
            retired.append(item)
        elif isinstance(item, str) and item in CudaGraphModule.__members__:
            modules.append(CudaGraphModule[item])
    return modules, retired, used_full


def _retired_modules_fit(config: Draft, retired: list[str]) -> bool:
    """One retired spelling at most, with an implementation it can be combined with."""
    if len(set(retired)) > 1:
        config.error(f"--cuda-graph-modules cannot hold several retired spellings at once "
                     f"({', '.join(sorted(set(retired)))})",
                     flags=("cuda_graph_modules",), hint="keep one of them")
        return False
    impl = config.cuda_graph_impl
    if retired and impl not in RETIRED_MODULES[retired[0]]:
        config.error(f"--cuda-graph-modules {retired[0]} is a retired spelling that cannot be "
                     f"combined with --cuda-graph-impl {impl}",
                     flags=("cuda_graph_modules", "cuda_graph_impl"),
                     hint=f"drop it from --cuda-graph-modules, or use --cuda-graph-impl "
                          f"{' or '.join(RETIRED_MODULES[retired[0]])}")
        return False
    return True


def derive_te_rng_tracker(config: Draft) -> None:
    """Transformer Engine CUDA graphs need Transformer Engine's RNG tracker (Megatron 0.13
    asks for it with --external-cuda-graph; 0.14 and 0.15 turn it on for Transformer Engine
    layers only)."""
    impl = config.cuda_graph_impl
    if impl == "none" or config.te_rng_tracker:
        return
    env = config.env
    if env.megatron.before("0.14.0"):
        if impl == "transformer_engine":
            config.error("--external-cuda-graph needs --te-rng-tracker in Megatron 0.13",
                         flags=("external_cuda_graph", "te_rng_tracker"),
                         hint="add --te-rng-tracker")
        return
    kinds = (config.get("transformer_impl"),) if env.megatron.before("0.16.0") \
        else (config.get("transformer_impl"), impl)
    if "transformer_engine" in kinds:
        config.warn("turning on --te-rng-tracker, which CUDA graphs with Transformer Engine need",
                    flags=("te_rng_tracker", "cuda_graph_impl"))
        config.set("te_rng_tracker", True, reason="CUDA graphs with Transformer Engine",
                   inputs=("cuda_graph_impl", "transformer_impl"))


def check_full_iteration_has_no_modules(config: Draft) -> None:
    """Whole-iteration capture has no per-module selection."""
    if config.cuda_graph_impl == "full_iteration" and config.cuda_graph_modules:
        names = " ".join(m.name if isinstance(m, CudaGraphModule) else str(m)
                         for m in config.cuda_graph_modules)
        config.error(f"--cuda-graph-modules {names} cannot be used with --cuda-graph-impl "
                     "full_iteration, which captures the whole iteration",
                     flags=("cuda_graph_modules", "cuda_graph_impl"),
                     hint="drop --cuda-graph-modules")


def check_allocator_settings(config: Draft) -> None:
    """Transformer Engine graphs with expandable segments need NCCL graph registration off
    (Megatron 0.14 and 0.15 refuse expandable segments, and full recompute, with any graphs)."""
    env = config.env
    if env.megatron.before("0.16.0"):
        if config.cuda_graph_impl != "none" and env.megatron.at_least("0.14.0"):
            _check_early_graph_limits(config)
        return
    if config.cuda_graph_impl != "transformer_engine":
        return
    alloc_conf: Optional[str] = config.env.getenv("PYTORCH_CUDA_ALLOC_CONF", "") or ""
    if "expandable_segments:True" in alloc_conf \
            and config.env.getenv("NCCL_GRAPH_REGISTER", "") != "0":
        config.error("--cuda-graph-impl transformer_engine with "
                     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True needs NCCL_GRAPH_REGISTER=0 "
                     "to avoid illegal memory accesses",
                     flags=("cuda_graph_impl", "PYTORCH_CUDA_ALLOC_CONF"),
                     hint="export NCCL_GRAPH_REGISTER=0, or drop expandable_segments:True")


def _check_early_graph_limits(config: Draft) -> None:
    line = config.env.release_line("megatron_core")
    if "expandable_segments:True" in (config.env.getenv("PYTORCH_CUDA_ALLOC_CONF", "") or ""):
        config.error(f"CUDA graphs with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True are "
                     f"refused in Megatron {line} (illegal memory accesses)",
                     flags=("cuda_graph_impl", "PYTORCH_CUDA_ALLOC_CONF"),
                     hint="drop expandable_segments:True")
    if config.get("recompute_granularity") == "full":
        config.error(f"CUDA graphs cannot be used with --recompute-granularity full in "
                     f"Megatron {line}", flags=("cuda_graph_impl", "recompute_granularity"),
                     hint="use --recompute-granularity selective, or no CUDA graphs")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    normalize_retired_switches,
    normalize_retired_scope_flag,
    normalize_line_scope,
    normalize_module_list,
)

DERIVE: tuple[Callable[[Draft], None], ...] = (derive_te_rng_tracker,)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_full_iteration_has_no_modules,
    check_full_iteration_impl_without_nan_check,
    check_line_full_iteration_scope,
    check_line_inference_iteration_scope,
    check_allocator_settings,
)
