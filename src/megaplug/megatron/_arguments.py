"""Megatron's flags on a plain argparse parser: ``add_megatron_arguments`` and the
``_add_*_args`` group adders that Megatron's tools import.

Each flag is translated from megaplug's flag table (so a blocked plugin's flags are absent
and a third-party plugin's are present); which flags a group adder adds is Megatron's
grouping, measured data in ``megatron_groups.json`` (``scripts/gen_megatron_groups.py``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .._api import load
from .._options import FlagSpec

#: Each group adder's settings, in the order it declares them.
ADDER_DESTS: dict[str, list[str]] = json.loads(
    (Path(__file__).parent / "megatron_groups.json").read_text(encoding="utf-8"))["adders"]

#: Megatron's ``_add_*_args`` group adders, by name (each defined below).
GROUP_ADDERS: tuple[str, ...] = tuple(sorted(ADDER_DESTS))

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable


def _flag_specs() -> list[FlagSpec]:
    return [spec for spec in load(())[0].table if spec.kind == "flag"]


def _add_specs(container: Any, specs: list[FlagSpec]) -> None:
    for spec in specs:
        strings, kwargs = spec.argparse_call()
        container.add_argument(*strings, **kwargs)


def _title(adder_name: str) -> str:
    return adder_name.removeprefix("_add_").removesuffix("_args").removesuffix(
        "_arguments").replace("_", " ")


def _group_adder(adder_name: str) -> Callable[[argparse.ArgumentParser],
                                              argparse.ArgumentParser]:
    dests = frozenset(ADDER_DESTS[adder_name])

    def add_group(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
        specs = [spec for spec in _flag_specs() if spec.dest in dests]
        if specs:
            _add_specs(parser.add_argument_group(title=_title(adder_name)), specs)
        return parser

    add_group.__name__ = add_group.__qualname__ = adder_name
    add_group.__doc__ = (f"Add the flags of Megatron's {_title(adder_name)!r} group to "
                         "``parser`` and return it (as Megatron's function of this name).")
    return add_group


def add_megatron_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every flag of the active plugins to ``parser``, in Megatron's groups; flags of
    other (third-party) plugins follow in a group per plugin. Returns ``parser``."""
    specs = _flag_specs()
    placed: set[str] = set()
    for adder_name, dests in ADDER_DESTS.items():
        wanted = frozenset(dests)
        group_specs = [spec for spec in specs if spec.dest in wanted]
        if group_specs:
            _add_specs(parser.add_argument_group(title=_title(adder_name)), group_specs)
            placed.update(spec.dest for spec in group_specs)
    by_plugin: dict[str, list[FlagSpec]] = {}
    for spec in specs:
        if spec.dest not in placed:
            by_plugin.setdefault(spec.plugin, []).append(spec)
    for plugin, plugin_specs in by_plugin.items():
        _add_specs(parser.add_argument_group(title=f"plugin {plugin}"), plugin_specs)
    return parser


_add_autoresume_args = _group_adder("_add_autoresume_args")
_add_biencoder_args = _group_adder("_add_biencoder_args")
_add_checkpointing_args = _group_adder("_add_checkpointing_args")
_add_data_args = _group_adder("_add_data_args")
_add_distributed_args = _group_adder("_add_distributed_args")
_add_experimental_args = _group_adder("_add_experimental_args")
_add_experimental_attention_variant_args = _group_adder(
    "_add_experimental_attention_variant_args")
_add_fault_injector_args = _group_adder("_add_fault_injector_args")
_add_ft_package_args = _group_adder("_add_ft_package_args")
_add_heterogeneous_args = _group_adder("_add_heterogeneous_args")
_add_inference_args = _group_adder("_add_inference_args")
_add_initialization_args = _group_adder("_add_initialization_args")
_add_inprocess_restart_args = _group_adder("_add_inprocess_restart_args")
_add_kitchen_quantization_arguments = _group_adder("_add_kitchen_quantization_arguments")
_add_learning_rate_args = _group_adder("_add_learning_rate_args")
_add_logging_args = _group_adder("_add_logging_args")
_add_logits_distillation_args = _group_adder("_add_logits_distillation_args")
_add_mixed_precision_args = _group_adder("_add_mixed_precision_args")
_add_mla_args = _group_adder("_add_mla_args")
_add_moe_args = _group_adder("_add_moe_args")
_add_msc_args = _group_adder("_add_msc_args")
_add_network_size_args = _group_adder("_add_network_size_args")
_add_one_logger_args = _group_adder("_add_one_logger_args")
_add_regularization_args = _group_adder("_add_regularization_args")
_add_rerun_machine_args = _group_adder("_add_rerun_machine_args")
_add_rl_args = _group_adder("_add_rl_args")
_add_sft_args = _group_adder("_add_sft_args")
_add_straggler_detector_args = _group_adder("_add_straggler_detector_args")
_add_tokenizer_args = _group_adder("_add_tokenizer_args")
_add_training_args = _group_adder("_add_training_args")
_add_triton_autotune_args = _group_adder("_add_triton_autotune_args")
_add_transformer_engine_args = _group_adder("_add_transformer_engine_args")
_add_validation_args = _group_adder("_add_validation_args")
_add_varlen_dataset_args = _group_adder("_add_varlen_dataset_args")
_add_vision_args = _group_adder("_add_vision_args")
_add_wide_residual_args = _group_adder("_add_wide_residual_args")
_add_workload_inspector_server_args = _group_adder("_add_workload_inspector_server_args")
