"""Pipeline parallelism: virtual stages (interleaved schedule), layouts and uneven splits."""

from __future__ import annotations

from megaplug import Draft, divisors

from .layout import LayoutError, parse_layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

#: The three ways to ask for virtual pipeline stages; at most one may be used.
VIRTUAL_PIPELINE_FLAGS = ("num_layers_per_virtual_pipeline_stage",
                          "num_virtual_stages_per_pipeline_rank",
                          "pipeline_model_parallel_layout")
UNEVEN_FLAGS = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
ACCOUNTING_FLAGS = ("account_for_embedding_in_pipeline_split",
                    "account_for_loss_in_pipeline_split")


def _layers_from_user(config: Draft) -> Optional[int]:
    """``num_layers`` as the user (or a hybrid pattern) set it, not as defaulted from T5's
    encoder layers by the model plugin, which Megatron does only after the pipeline split."""
    source = config.source("num_layers")
    if (config.given("num_layers") or config.get("hybrid_layer_pattern") is not None
            or (source is not None and source.source == "default")):
        return config.get("num_layers")
    return None


def _split_layers(config: Draft, num_layers: int) -> int:
    """Layers to split across stages, counting the embedding and loss when asked to."""
    return (num_layers + int(config.account_for_embedding_in_pipeline_split)
            + int(config.account_for_loss_in_pipeline_split))


def _uneven(config: Draft) -> bool:
    return any(config[name] is not None for name in UNEVEN_FLAGS)


def derive_virtual_pipeline(config: Draft) -> None:
    """Set ``virtual_pipeline_model_parallel_size`` from the layout or virtual-stage flags."""
    chosen = [name for name in VIRTUAL_PIPELINE_FLAGS if config[name] is not None]
    if len(chosen) > 1:
        given = ", ".join(f"{config.spelling(n)} {config[n]}" for n in chosen)
        config.error(f"only one way to set virtual pipeline stages may be used, got {given}",
                     flags=tuple(chosen), hint="keep one of these flags and drop the others")
        return
    if config.pipeline_model_parallel_size < 1:
        return
    if config.pipeline_model_parallel_layout is not None:
        vpp = _stages_from_layout(config)
    elif chosen:
        vpp = _stages_from_flags(config)
    else:
        _check_even_split(config)
        if config.get("hybrid_layer_pattern") is not None:
            return  # the experimental plugin derived it from the pattern's segments
        vpp = None
    from_flags = chosen and config.pipeline_model_parallel_layout is None
    if vpp == 1 and (not from_flags or config.env.megatron.at_least("0.14.0")):
        vpp = None  # Megatron 0.13 keeps a single virtual stage the flags ask for
    config.set("virtual_pipeline_model_parallel_size", vpp, inputs=tuple(chosen) or (
        "pipeline_model_parallel_size",))


def _stages_from_layout(config: Draft) -> Optional[int]:
    text, pp = config.pipeline_model_parallel_layout, config.pipeline_model_parallel_size
    try:
        layout = parse_layout(text)
    except LayoutError as exc:
        config.error(f"--pipeline-model-parallel-layout is malformed: {exc}",
                     flags=("pipeline_model_parallel_layout",),
                     hint="describe stages with E, t, m, L separated by '|', e.g. 'Et|(tt|)*3L'")
        return None
    if layout.num_stages % pp:
        config.error(
            f"--pipeline-model-parallel-layout describes {layout.num_stages} stages, which is not "
            f"a multiple of --pipeline-model-parallel-size {pp}",
            flags=("pipeline_model_parallel_layout", "pipeline_model_parallel_size"),
            hint=f"describe a multiple of {pp} stages ('|' ends a stage)")
        return None
    _warn_layout_layer_count(config, layout.count("t"))
    return layout.num_stages // pp


def _warn_layout_layer_count(config: Draft, layers_in_layout: int) -> None:
    num_layers = config.get("num_layers")
    if num_layers is not None and layers_in_layout != num_layers:
        config.warn(f"--pipeline-model-parallel-layout places {layers_in_layout} decoder layers "
                    f"('t') but --num-layers is {num_layers}; building the model will fail",
                    flags=("pipeline_model_parallel_layout", "num_layers"))


def _stages_from_flags(config: Draft) -> Optional[int]:
    per_rank = config.num_virtual_stages_per_pipeline_rank
    if per_rank is not None:
        if per_rank < 1:
            # Megatron takes the value as the virtual pipeline size; only the model build fails
            config.warn(f"--num-virtual-stages-per-pipeline-rank is {per_rank}; building the "
                        "model will fail (use 2 or more for the interleaved schedule)",
                        flags=("num_virtual_stages_per_pipeline_rank",))
        return per_rank
    if _uneven(config):
        config.error(
            "uneven pipeline stages cannot be combined with "
            "--num-layers-per-virtual-pipeline-stage",
            flags=("num_layers_per_virtual_pipeline_stage", *UNEVEN_FLAGS),
            hint="give the virtual pipeline degree with --num-virtual-stages-per-pipeline-rank")
        return None
    return _stages_from_layers_per_stage(config)


def _stages_from_layers_per_stage(config: Draft) -> Optional[int]:
    per_stage = config.num_layers_per_virtual_pipeline_stage
    num_layers = _layers_from_user(config)
    if num_layers is None:
        num_layers = config.get("decoder_num_layers")
    if num_layers is None:
        config.error("--num-layers-per-virtual-pipeline-stage needs the number of layers",
                     flags=("num_layers_per_virtual_pipeline_stage", "num_layers"),
                     hint="set --num-layers")
        return None
    layers, pp = _split_layers(config, num_layers), config.transformer_pipeline_model_parallel_size
    if layers % pp:
        config.error(f"{_counted(config, layers)} cannot be split evenly over "
                     f"--pipeline-model-parallel-size {pp}",
                     flags=("num_layers", "pipeline_model_parallel_size", *ACCOUNTING_FLAGS),
                     hint=f"use a layer count that is a multiple of {pp}")
        return None
    per_pipeline_stage = layers // pp
    if per_stage == 0:
        config.error("--num-layers-per-virtual-pipeline-stage is 0; a virtual stage needs at "
                     "least one layer", flags=("num_layers_per_virtual_pipeline_stage",),
                     hint=f"use a divisor of {per_pipeline_stage}")
        return None
    # Python's modulo, as Megatron's assert computes it
    if per_pipeline_stage % per_stage:
        config.error(
            f"each of the {pp} pipeline stages holds {per_pipeline_stage} layers, which is not a "
            f"multiple of --num-layers-per-virtual-pipeline-stage {per_stage}",
            flags=("num_layers_per_virtual_pipeline_stage", "num_layers",
                   "pipeline_model_parallel_size"),
            hint=f"use a divisor of {per_pipeline_stage}: "
                 + ", ".join(map(str, divisors(per_pipeline_stage))))
        return None
    return per_pipeline_stage // per_stage


def _counted(config: Draft, layers: int) -> str:
    extras = [word for word, name in zip(("embedding", "loss"), ACCOUNTING_FLAGS) if config[name]]
    if not extras:
        return f"{layers} layers"
    return f"{layers} layers (counting the {' and '.join(extras)})"


def _check_even_split(config: Draft) -> None:
    """Without virtual stages or uneven first/last stages, layers split evenly over PP."""
    if _uneven(config) or config.get("hybrid_layer_pattern") is not None:
        return
    num_layers = _layers_from_user(config)
    if num_layers is None:
        return
    layers, pp = _split_layers(config, num_layers), config.transformer_pipeline_model_parallel_size
    if layers % pp:
        config.error(
            f"{_counted(config, layers)} cannot be split evenly over "
            f"--pipeline-model-parallel-size {pp}",
            flags=("num_layers", "pipeline_model_parallel_size", *ACCOUNTING_FLAGS),
            hint=f"use a multiple of {pp} layers, or place layers unevenly with "
                 "--decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers "
                 "or --pipeline-model-parallel-layout")


def derive_non_interleaved_schedule(config: Draft) -> None:
    """Without virtual stages there is no p2p overlap and no aligned parameter gather."""
    if config.virtual_pipeline_model_parallel_size is not None:
        return
    changed = [name for name in ("overlap_p2p_comm", "align_param_gather") if config[name]]
    for name in changed:
        config.set(name, False, inputs=("virtual_pipeline_model_parallel_size",),
                   reason="the non-interleaved schedule does not support it")
    if changed and config.pipeline_model_parallel_size > 1:
        config.warn("turning off p2p communication overlap and aligned parameter all-gather: "
                    "the non-interleaved pipeline schedule supports neither",
                    flags=("overlap_p2p_comm", "align_param_gather"))


def check_interleaved_schedule(config: Draft) -> None:
    """The interleaved schedule needs PP > 1, or PP > 2 without p2p overlap."""
    if config.virtual_pipeline_model_parallel_size is None:
        return
    pp = config.pipeline_model_parallel_size
    if config.overlap_p2p_comm and pp <= 1:
        config.error(
            f"virtual pipeline stages (interleaved schedule) need --pipeline-model-parallel-size "
            f"greater than 1, got {pp}",
            flags=("pipeline_model_parallel_size", *VIRTUAL_PIPELINE_FLAGS),
            hint="raise the pipeline-parallel size or drop the virtual-stage flags")
    elif not config.overlap_p2p_comm and pp <= 2:
        config.error(
            f"the interleaved schedule without p2p overlap (--no-overlap-p2p-communication) "
            f"needs --pipeline-model-parallel-size greater than 2, got {pp}",
            flags=("pipeline_model_parallel_size", "overlap_p2p_comm"),
            hint="keep p2p overlap on, or use at least 3 pipeline stages, so two ranks never "
                 "exchange several sends and receives in one batch")


def check_uneven_stage_sizes(config: Draft) -> None:
    """First/last stage layer counts should be positive.

    Megatron's argument validation accepts any count (the model build rejects it later),
    so this only warns.
    """
    for name in UNEVEN_FLAGS:
        value = config[name]
        if value is not None and value < 1:
            config.warn(f"{config.spelling(name)} is {value}; a stage needs at least one layer, "
                        "so building the model will fail", flags=(name,))


DERIVE: tuple[Callable[[Draft], None], ...] = (
    derive_virtual_pipeline,
    derive_non_interleaved_schedule,
)

VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_uneven_stage_sizes,
    check_interleaved_schedule,
)
