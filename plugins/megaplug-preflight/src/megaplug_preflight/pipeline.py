"""Pipeline stages: uneven first/last stages, embedding and loss accounting, explicit layouts."""

from __future__ import annotations

import re

from megaplug import Draft

from ._report import reject, shown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

UNEVEN = ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers")
ACCOUNTING = ("account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")
LAYOUT = "pipeline_model_parallel_layout"

#: Layer symbols of a pipeline layout: embedding, loss, transformer (decoder) layer, MTP layer.
LAYOUT_SYMBOLS = frozenset("ELtm")
#: Megatron unrolls ``(...)*n`` groups first, then ``x*n`` repeats.
#: (Text, compiled when a layout is first read.)
_GROUP_REPEAT = r"\(([^)]+)\)\*(\d+)"
_SYMBOL_REPEAT = r"(.)\*(\d+)"


def layout_stages(text: str) -> list[str] | None:
    """A layout's stages in order (``'Et|tt|tL'`` -> ``['Et', 'tt', 'tL']``), or None when a
    character is not a layer symbol (Megatron's validate_args reports that)."""
    text = text.replace(",", "")
    for pattern in (_GROUP_REPEAT, _SYMBOL_REPEAT):
        text = re.sub(pattern, lambda match: match.group(1) * int(match.group(2)), text)
    stages = text.split("|")
    if any(symbol not in LAYOUT_SYMBOLS for stage in stages for symbol in stage):
        return None
    return stages


def _given(config: Draft, names: tuple[str, ...]) -> list[str]:
    """The flags among ``names`` that are set: a stage size (even 0) or a true switch."""
    return [n for n in names if config.get(n) is not None and config.get(n) is not False]


def pipeline_size_positive(config: Draft) -> None:
    """validate_args computes with a non-positive pipeline size; the model cannot have one."""
    pp = config.get("pipeline_model_parallel_size", 1)
    if pp is not None and pp <= 0:
        reject(config, f"{shown(config, 'pipeline_model_parallel_size')} must be at least 1",
               flags=("pipeline_model_parallel_size",), hint="use 1 for no pipeline parallelism")


def uneven_stages_not_with_accounting(config: Draft) -> None:
    """Uneven stage sizes are explicit; accounting for embedding and loss is another way."""
    uneven, accounting = _given(config, UNEVEN), _given(config, ACCOUNTING)
    if uneven and accounting:
        reject(config, f"{' / '.join(config.spelling(n) for n in uneven)} cannot be combined with "
                       f"{' / '.join(config.spelling(n) for n in accounting)}",
               flags=(*uneven, *accounting),
               hint="size the first/last stages yourself, or let the embedding and loss count "
                    "as layers; not both")


def layout_excludes_other_split_flags(config: Draft) -> None:
    """An explicit layout places every layer; other split flags would contradict it."""
    others = _given(config, UNEVEN + ACCOUNTING)
    if config.get(LAYOUT) is not None and others:
        reject(config, f"--pipeline-model-parallel-layout cannot be combined with "
                       f"{', '.join(config.spelling(n) for n in others)}",
               flags=(LAYOUT, *others), hint="describe the split in the layout alone")


def layout_places_the_model(config: Draft) -> None:
    """A layout starts with the embedding, ends with the loss, and places every decoder and
    MTP layer exactly once, MTP layers last and together."""
    text, pp = config.get(LAYOUT), config.get("pipeline_model_parallel_size", 1)
    if text is None or not pp or pp < 1:
        return
    stages = layout_stages(text)
    if stages is None or len(stages) % pp:
        return  # reported by validate_args
    flat = "".join(stages)
    problems = []
    if not flat.startswith("E") or flat.count("E") != 1:
        problems.append("must start with the embedding 'E' and hold it once")
    if not flat.endswith("L") or flat.count("L") != 1:
        problems.append("must end with the loss 'L' and hold it once")
    num_layers = config.get("num_layers")
    if num_layers is not None and flat.count("t") != num_layers:
        problems.append(f"places {flat.count('t')} decoder layers ('t'), but "
                        f"{shown(config, 'num_layers', num_layers)}")
    mtp_layers = config.get("mtp_num_layers")
    if flat.count("m") != (mtp_layers or 0) or (mtp_layers == 0 and "m" in flat):
        problems.append(f"places {flat.count('m')} MTP layers ('m'), but --mtp-num-layers is "
                        f"{mtp_layers}")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        problems.append("places a decoder layer after an MTP layer")
    last_round = (len(stages) // pp - 1) * pp
    mtp_stages = [i for i, stage in enumerate(stages) if "m" in stage]
    if any(i < last_round for i in mtp_stages):
        problems.append("puts MTP layers in a stage other than a rank's last virtual stage")
    elif mtp_layers and any(stages[i].count("m") != mtp_layers for i in mtp_stages):
        problems.append("splits the MTP layers over several stages")
    for problem in problems:
        reject(config, f"--pipeline-model-parallel-layout {text} {problem}",
               flags=(LAYOUT, "num_layers", "mtp_num_layers"),
               hint="write the layout as E, then the stages' 't' (and 'm') layers separated "
                    "by '|', then L, e.g. 'Et|(tt|)*3tL'")


def uneven_stage_sizes(config: Draft) -> None:
    """First and last stages hold a positive number of layers, each a multiple of the
    virtual pipeline size; the remaining layers split evenly over the middle stages."""
    if config.get(LAYOUT) is not None or not _given(config, UNEVEN):
        return
    vpp = config.get("virtual_pipeline_model_parallel_size")
    layers = config.get("num_layers") or 0
    stages = config.get("pipeline_model_parallel_size", 1)
    for dest in UNEVEN:
        count = config.get(dest)
        if count is None:
            continue
        if count <= 0:
            reject(config, f"{shown(config, dest)} must be at least 1", flags=(dest,),
                   hint="give the stage at least one layer")
        elif vpp and count % vpp:  # a virtual size of 0 is refused by the parallel plugin
            reject(config, f"{shown(config, dest)} is not a multiple of the {vpp} virtual "
                           "pipeline stages per rank",
                   flags=(dest, "num_virtual_stages_per_pipeline_rank"),
                   hint=f"use a multiple of {vpp}")
        layers -= count
        stages -= 1
    flags = (*_given(config, UNEVEN), "num_layers", "pipeline_model_parallel_size")
    if bool(layers) != bool(stages):
        reject(config, f"the uneven split leaves {layers} layers for {stages} middle stages",
               flags=flags, hint="make the first and last stage sizes add up with the middle "
                                 "stages' share of --num-layers")
    elif stages and layers % stages:
        reject(config, f"the {layers} layers between the first and last stage cannot be split "
                       f"evenly over {stages} middle stages",
               flags=flags, hint=f"leave a multiple of {stages} layers for the middle stages")
    elif stages and vpp and (layers // stages) % vpp:
        reject(config, f"each middle stage holds {layers // stages} layers, not a multiple of "
                       f"the {vpp} virtual pipeline stages per rank",
               flags=flags, hint=f"give each middle stage a multiple of {vpp} layers")


def accounted_layers_divide_over_stages(config: Draft) -> None:
    """Counting the embedding and loss as layers, the stages still split evenly."""
    accounting = _given(config, ACCOUNTING)
    if config.get(LAYOUT) is not None or _given(config, UNEVEN) or not accounting:
        return
    layers = (config.get("num_layers") or 0) + len(accounting)
    pp = config.get("pipeline_model_parallel_size", 1)
    vpp = config.get("virtual_pipeline_model_parallel_size")
    flags = (*accounting, "num_layers", "pipeline_model_parallel_size")
    if not pp:
        return
    if layers % pp:
        # validate_args reports this itself, except for hybrid models
        if config.get("hybrid_layer_pattern") is not None:
            reject(config, f"{layers} layers (counting the embedding / loss) cannot be split "
                           f"evenly over {shown(config, 'pipeline_model_parallel_size')}",
                   flags=flags, hint=f"use a layer count that makes a multiple of {pp}")
    elif vpp and (layers // pp) % vpp:
        reject(config, f"each pipeline rank holds {layers // pp} layers (counting the embedding "
                       f"/ loss), not a multiple of its {vpp} virtual stages",
               flags=(*flags, "num_virtual_stages_per_pipeline_rank"),
               hint=f"give each rank a multiple of {vpp} layers")


def pipeline_communication_overlap(config: Draft) -> None:
    """Overlapping p2p in warm-up and flush extends p2p overlap, which validate_args keeps
    on only for the interleaved schedule (and ``--no-overlap-p2p-communication`` turns off)."""
    if config.get("overlap_p2p_comm_warmup_flush") and not config.get("overlap_p2p_comm"):
        reject(config, "--overlap-p2p-communication-warmup-flush needs p2p overlap, which is "
                       "on only with an interleaved pipeline schedule and without "
                       "--no-overlap-p2p-communication",
               flags=("overlap_p2p_comm_warmup_flush", "overlap_p2p_comm"),
               hint="use --num-virtual-stages-per-pipeline-rank without "
                    "--no-overlap-p2p-communication, or drop "
                    "--overlap-p2p-communication-warmup-flush")


def deferred_embedding_gradients(config: Draft) -> None:
    """Deferring the embedding's weight gradient overlaps it with pipeline bubbles."""
    if not config.get("defer_embedding_wgrad_compute"):
        return
    if config.get("pipeline_model_parallel_size", 1) == 1:
        reject(config, "--defer-embedding-wgrad-compute needs pipeline parallelism",
               flags=("defer_embedding_wgrad_compute", "pipeline_model_parallel_size"),
               hint="drop it, or use --pipeline-model-parallel-size 2 or more")
    if not config.get("gradient_accumulation_fusion"):
        reject(config, "--defer-embedding-wgrad-compute needs gradient accumulation fusion, "
                       "which --no-gradient-accumulation-fusion turns off",
               flags=("defer_embedding_wgrad_compute", "gradient_accumulation_fusion"),
               hint="drop --no-gradient-accumulation-fusion")
    limit = config.get("wgrad_deferral_limit")
    if limit is not None and limit < 0:
        reject(config, f"{shown(config, 'wgrad_deferral_limit')} must not be negative",
               flags=("wgrad_deferral_limit",), hint="use 0 or more")


CHECKS: tuple[Check, ...] = (
    pipeline_size_positive,
    uneven_stages_not_with_accounting,
    layout_excludes_other_split_flags,
    layout_places_the_model,
    uneven_stage_sizes,
    accounted_layers_divide_over_stages,
    pipeline_communication_overlap,
    deferred_embedding_gradients,
)
