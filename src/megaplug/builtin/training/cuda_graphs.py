"""CUDA graphs: retired switches, module-list normalization and capture requirements."""

from __future__ import annotations

from typing import Any, Optional

from megaplug import Draft

from .enums import CudaGraphModule

#: Retired module spellings that now mean another setting: (setting, value it migrates to).
_MIGRATIONS: dict[str, tuple[str, str]] = {
    "full_iteration": ("cuda_graph_impl", "full_iteration"),
    "full_iteration_inference": ("inference_cuda_graph_scope", "block"),
}


def normalize_retired_switches(config: Draft) -> None:
    """--enable-cuda-graph / --external-cuda-graph become --cuda-graph-impl local / transformer_engine.

    A switch that was used leaves the result, as Megatron deletes it once translated; an
    unused one stays (False).
    """  # noqa: E501
    local, external = config.enable_cuda_graph, config.external_cuda_graph
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


def normalize_retired_scope_flag(config: Draft) -> None:
    """--cuda-graph-scope is the old spelling of --cuda-graph-modules."""
    scope = config.cuda_graph_scope_deprecated
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
    impl = config.cuda_graph_impl
    if _check_migration_inputs(config, retired, impl):
        for spelling in retired:
            _migrate(config, spelling, impl)
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
        elif item in _MIGRATIONS:
            retired.append(item)
        elif isinstance(item, str) and item in CudaGraphModule.__members__:
            modules.append(CudaGraphModule[item])
    return modules, retired, used_full


#: Per retired spelling: the implementations it may be combined with, and the inference
#: scopes (by name; None for unset) an explicit --inference-cuda-graph-scope may have.
_MIGRATION_INPUTS: dict[str, tuple[tuple[str, ...], tuple[Optional[str], ...]]] = {
    "full_iteration": (("none", "local", "full_iteration"), (None, "none")),
    "full_iteration_inference": (("none", "local"), (None, "block")),
}


def _check_migration_inputs(config: Draft, retired: list[str], impl: str) -> bool:
    if not retired:
        return True
    if len(set(retired)) > 1:
        config.error(f"--cuda-graph-modules cannot hold several retired spellings at once "
                     f"({', '.join(sorted(set(retired)))})",
                     flags=("cuda_graph_modules",), hint="keep one of them")
        return False
    spelling = retired[0]
    impls, scopes = _MIGRATION_INPUTS[spelling]
    ok = True
    if impl not in impls:
        config.error(f"--cuda-graph-modules {spelling} is a retired spelling that cannot be "
                     f"combined with --cuda-graph-impl {impl}",
                     flags=("cuda_graph_modules", "cuda_graph_impl"),
                     hint=f"drop it from --cuda-graph-modules, or use --cuda-graph-impl "
                          f"{' or '.join(impls)}")
        ok = False
    explicit_scope = config.get("inference_cuda_graph_scope")
    scope = None if explicit_scope is None else _scope_name(explicit_scope).rsplit(".", 1)[-1]
    if scope not in scopes:
        config.error(f"--cuda-graph-modules {spelling} cannot be combined with "
                     f"--inference-cuda-graph-scope {scope}",
                     flags=("cuda_graph_modules", "inference_cuda_graph_scope"),
                     hint=f"drop {spelling}, or use --inference-cuda-graph-scope {scopes[1]}")
        ok = False
    return ok


def _migrate(config: Draft, spelling: str, impl: str) -> None:
    setting, value = _MIGRATIONS[spelling]
    if spelling == "full_iteration_inference" and impl == "none":
        config.warn(f"--cuda-graph-modules {spelling} is deprecated and has no effect with "
                    "--cuda-graph-impl none; use --cuda-graph-impl local with "
                    "--inference-cuda-graph-scope block for inference CUDA graphs",
                    flags=("cuda_graph_modules",))
        return
    if setting not in config:
        return  # the plugin that owns the setting is not installed
    flag = "--" + setting.replace("_", "-")
    config.warn(f"--cuda-graph-modules {spelling} is deprecated; setting {flag}={value} instead",
                flags=("cuda_graph_modules", setting))
    config.set(setting, value, reason=f"retired --cuda-graph-modules {spelling}",
               inputs=("cuda_graph_modules",))


def _scope_name(value: Any) -> str:
    return str(getattr(value, "name", value))


def derive_te_rng_tracker(config: Draft) -> None:
    """Transformer Engine CUDA graphs need Transformer Engine's RNG tracker."""
    impl = config.cuda_graph_impl
    if impl == "none" or config.te_rng_tracker:
        return
    if "transformer_engine" in (config.get("transformer_impl"), impl):
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
    """Transformer Engine graphs with expandable segments need NCCL graph registration off."""
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
