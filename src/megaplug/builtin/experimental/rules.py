"""Experimental-plugin normalizations, derivations and checks, each a small function."""

from __future__ import annotations


from megaplug import Draft, TorchDType

from .hybrid import HybridPattern, HybridPatternError, parse_hybrid_pattern, unified_pattern

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable, Optional

#: CLI dtype names and the torch dtypes they stand for.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "fp8": "uint8"}
OPTIMIZER_DTYPE_FLAGS = ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype",
                         "exp_avg_sq_dtype")

#: Pipeline flags a hybrid pattern replaces: its '|' segments define the stages.
PATTERN_DEFINED_PIPELINE = (
    ("num_layers_per_virtual_pipeline_stage",
     "describe a multiple of --pipeline-model-parallel-size segments with '|' instead"),
    ("num_virtual_stages_per_pipeline_rank",
     "virtual stages follow from the number of '|' segments"),
    ("pipeline_model_parallel_layout", "stages are the pattern's '|' segments"),
    ("account_for_embedding_in_pipeline_split", "stages are the pattern's '|' segments"),
    ("account_for_loss_in_pipeline_split", "stages are the pattern's '|' segments"),
)
UNEVEN_FLAGS = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")


def _hybrid(config: Draft) -> Optional[HybridPattern]:
    """The parsed pattern, or None when there is none or it is malformed (reported once)."""
    text = config.hybrid_layer_pattern
    if text is None:
        return None
    try:
        return parse_hybrid_pattern(text)
    except HybridPatternError:
        return None


# -- normalize ---------------------------------------------------------------------------


def migrate_hybrid_override_pattern(config: Draft) -> None:
    """``--hybrid-override-pattern`` is the old name of ``--hybrid-layer-pattern``."""
    old = config.hybrid_override_pattern
    if old is None:
        return
    if config.hybrid_layer_pattern is not None:
        config.error("--hybrid-override-pattern and --hybrid-layer-pattern cannot both be given",
                     flags=("hybrid_override_pattern", "hybrid_layer_pattern"),
                     hint="keep --hybrid-layer-pattern; --hybrid-override-pattern is deprecated")
        return
    config.warn("--hybrid-override-pattern is deprecated; use --hybrid-layer-pattern",
                flags=("hybrid_override_pattern",))
    config.set("hybrid_layer_pattern", old, inputs=("hybrid_override_pattern",),
               reason="deprecated spelling")


def migrate_legacy_mtp_pattern(config: Draft) -> None:
    """A separate MTP pattern becomes '/'-appended depths of the unified pattern."""
    legacy = config.get("mtp_hybrid_override_pattern")
    if legacy is None:
        return
    config.warn("--mtp-hybrid-override-pattern is deprecated and kept only to load old "
                "checkpoints; write MTP depths into --hybrid-layer-pattern after '/', e.g. "
                "'M*M*/MM/MM' (two depths of 'MM')", flags=("mtp_hybrid_override_pattern",))
    depths, main = config.get("mtp_num_layers") or 0, config.hybrid_layer_pattern
    if depths <= 0 or (main is not None and "/" in main):
        return
    config.set("hybrid_layer_pattern", unified_pattern(main, legacy, depths),
               inputs=("hybrid_layer_pattern", "mtp_hybrid_override_pattern", "mtp_num_layers"),
               reason="legacy MTP pattern appended as MTP depths")
    config.set("mtp_hybrid_override_pattern", None, reason="merged into --hybrid-layer-pattern")


NORMALIZE: tuple[Callable[[Draft], None], ...] = (
    migrate_hybrid_override_pattern,
    migrate_legacy_mtp_pattern,
)


# -- derive --------------------------------------------------------------------------------


def check_pattern_syntax(config: Draft) -> None:
    """Report a malformed pattern once; the other hooks then skip it."""
    text = config.hybrid_layer_pattern
    if text is None:
        return
    try:
        parse_hybrid_pattern(text)
    except HybridPatternError as exc:
        config.error(f"--hybrid-layer-pattern {text!r}: {exc}", flags=("hybrid_layer_pattern",),
                     hint="use M, G, *, D, - and E for layers, '|' between pipeline segments "
                          "and '/' before each MTP depth")


def derive_layers_from_pattern(config: Draft) -> None:
    """The pattern decides the number of layers, over any ``--num-layers``."""
    pattern = _hybrid(config)
    if pattern is None or "num_layers" not in config:
        return
    count, given = pattern.layer_count, config.num_layers
    if given is not None and given != count:
        config.warn(f"ignoring --num-layers {given}: --hybrid-layer-pattern has {count} layers",
                    flags=("num_layers", "hybrid_layer_pattern"))
    if given != count:
        config.set("num_layers", count, inputs=("hybrid_layer_pattern",),
                   reason="layers in the hybrid pattern")


def derive_virtual_pipeline_from_pattern(config: Draft) -> None:
    """'|' segments beyond one per pipeline rank become virtual pipeline stages."""
    pattern, pp = _hybrid(config), config.get("pipeline_model_parallel_size", 1)
    if pattern is None or pp < 1 or "virtual_pipeline_model_parallel_size" not in config:
        return
    segments = pattern.pipeline_segments
    if segments % pp and not (segments == 1 and pp > 1):
        config.error(f"--hybrid-layer-pattern has {segments} pipeline segments, which is not a "
                     f"multiple of --pipeline-model-parallel-size {pp}",
                     flags=("hybrid_layer_pattern", "pipeline_model_parallel_size"),
                     hint=f"split the pattern with '|' into a multiple of {pp} segments")
        return
    # One segment with PP > 1: the model splits the pattern itself at build time.
    vpp = segments // pp if segments > pp else None
    config.set("virtual_pipeline_model_parallel_size", vpp,
               inputs=("hybrid_layer_pattern", "pipeline_model_parallel_size"),
               reason="pipeline segments of the hybrid pattern")


def derive_mtp_depths_from_pattern(config: Draft) -> None:
    """The number of '/'-separated MTP depths sets ``--mtp-num-layers``."""
    pattern = _hybrid(config)
    if pattern is None or not pattern.mtp_depths or "mtp_num_layers" not in config:
        return
    depths, given = pattern.mtp_depths, config.mtp_num_layers
    if given == depths:
        return
    if given is not None:
        config.warn(f"--mtp-num-layers {given} disagrees with the {depths} MTP depths of "
                    f"--hybrid-layer-pattern; using {depths}",
                    flags=("mtp_num_layers", "hybrid_layer_pattern"))
    config.set("mtp_num_layers", depths, inputs=("hybrid_layer_pattern",),
               reason="MTP depths in the hybrid pattern")


def derive_optimizer_dtypes(config: Draft) -> None:
    """Main-gradient, main-parameter and Adam-state dtypes become torch dtypes."""
    for name in OPTIMIZER_DTYPE_FLAGS:
        value = config[name]
        if isinstance(value, str) and value in DTYPES:
            config.set(name, TorchDType(DTYPES[value]), inputs=(name,))


DERIVE: tuple[Callable[[Draft], None], ...] = (
    check_pattern_syntax,
    derive_layers_from_pattern,
    derive_virtual_pipeline_from_pattern,
    derive_mtp_depths_from_pattern,
    derive_optimizer_dtypes,
)


# -- validate ------------------------------------------------------------------------------


def check_pattern_defines_pipeline(config: Draft) -> None:
    """With a hybrid pattern, its '|' segments are the pipeline layout; other layout flags
    (and, when it has '|', uneven first/last stages) would contradict it."""
    pattern = _hybrid(config)
    if pattern is None:
        return
    for name, why in PATTERN_DEFINED_PIPELINE:
        value = config.get(name)
        # identity, not equality: a given 0 is a value (0 == False would hide it)
        if value is not None and value is not False:
            config.error(f"{config.spelling(name)} cannot be used with --hybrid-layer-pattern",
                         flags=(name, "hybrid_layer_pattern"), hint=f"drop it; {why}")
    if not pattern.has_pipes:
        return
    for name in UNEVEN_FLAGS:
        if config.get(name) is not None:
            config.error(f"{config.spelling(name)} cannot be used with a --hybrid-layer-pattern "
                         "that has '|' pipeline segments",
                         flags=(name, "hybrid_layer_pattern"),
                         hint="drop it; the '|' segments already place the layers")


def check_yaml_cfg(config: Draft) -> None:
    """Megatron's YAML model configs replace the whole command line; megaplug reads config
    files through ``--config`` instead."""
    if config.yaml_cfg is None:
        return
    config.error(f"--yaml-cfg {config.yaml_cfg} is not supported",
                 flags=("yaml_cfg",),
                 hint="write the settings as a flat YAML mapping of flag names and pass it "
                      "with --config FILE")
    if config.triton_autotune_block_sizes:
        config.error("--triton-autotune-block-sizes cannot be combined with --yaml-cfg",
                     flags=("triton_autotune_block_sizes", "yaml_cfg"),
                     hint="set the Triton autotune policy in the YAML configuration instead")


def check_precision_aware_dtypes(config: Draft) -> None:
    """Lower-precision main parameters and Adam states exist only in the precision-aware
    optimizer."""
    if config.use_precision_aware_optimizer:
        return
    lowered = [name for name in OPTIMIZER_DTYPE_FLAGS[1:]
               if str(config[name]) not in ("fp32", "torch.float32")]
    if lowered:
        config.warn(f"{', '.join(config.spelling(n) for n in lowered)} take effect only with "
                    "--use-precision-aware-optimizer",
                    flags=(*lowered, "use_precision_aware_optimizer"))


VALIDATE: tuple[Callable[[Draft], None], ...] = (
    check_pattern_defines_pipeline,
    check_yaml_cfg,
    check_precision_aware_dtypes,
)
