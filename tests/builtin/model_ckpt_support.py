"""Test support for the model and checkpointing plugins.

A stand-in plugin (``neighbours``) declares the few settings of other plugins that model
and checkpointing read or adjust, so these tests do not depend on how the other built-in
plugins progress. Like the real ``experimental`` plugin, it runs before ``model`` and
derives ``num_layers`` from ``--hybrid-layer-pattern`` (here: one layer per character).
"""

from __future__ import annotations

import json
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from typing_extensions import Annotated

import megaplug
from megaplug import Flag, PluginInfo, hookimpl
from megaplug.values._encoding import encode
from megaplug.builtin import checkpointing, model

#: A minimal model the model plugin accepts.
BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--max-position-embeddings", "128"]
NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}
FLAGS_JSONL = Path(__file__).resolve().parents[3] / "shared" / "megatron" / "flags.jsonl"
SEED_ONLY = FLAGS_JSONL.with_name("seed_only_flags.txt")


@dataclass
class NeighbourOptions:
    seq_length: Optional[int] = None
    decoder_seq_length: Optional[int] = None
    fp16: bool = False
    bf16: bool = False
    spec: Annotated[Optional[list[str]], Flag(nargs="*")] = None
    yaml_cfg: Optional[str] = None
    hybrid_layer_pattern: Optional[str] = None
    bias_gelu_fusion: Annotated[bool, Flag("--no-bias-gelu-fusion")] = True
    apply_rope_fusion: Annotated[bool, Flag("--no-rope-fusion")] = True
    attention_softmax_in_fp32: bool = False
    tensor_model_parallel_size: int = 1
    pipeline_model_parallel_size: int = 1
    optimizer: str = "adam"
    use_gloo_process_groups: Annotated[bool, Flag("--disable-gloo-process-groups")] = True
    use_distributed_optimizer: bool = False
    overlap_param_gather: bool = False
    skip_train: bool = False


def _neighbours() -> types.ModuleType:
    module = types.ModuleType("neighbours")
    module.megaplug_plugin = PluginInfo(name="neighbours", before=("model", "checkpointing"))

    @hookimpl
    def add_args(flags: Any) -> None:
        flags.add_options(NeighbourOptions)

    @hookimpl
    def derive(config: megaplug.Draft) -> None:
        pattern = config.hybrid_layer_pattern
        if pattern is not None:
            config.set("num_layers", len(pattern), inputs=("hybrid_layer_pattern",))

    module.add_args = add_args
    module.derive = derive
    return module


NEIGHBOURS = _neighbours()
TARGET = dict(packages={"transformer_engine": "2.17.1", "nvidia_resiliency_ext": None},
              device_capability=(9, 0))


def kernel() -> Any:
    """A kernel of model, checkpointing and the neighbour stand-in only."""
    return megaplug.load([], environ=NO_AUTOLOAD,
                         builtins=[model, checkpointing, NEIGHBOURS])[0]


def resolve(argv: list[str], **packages: Optional[str]) -> megaplug.Resolved:
    """Resolve ``argv`` for a Hopper GPU with Transformer Engine 2.17.1 (override by name)."""
    target = megaplug.TargetEnvironment(packages={**TARGET["packages"], **packages},
                                        device_capability=(9, 0), environ={})
    return kernel().resolve(argv, environ={}, target=target)


def problems(argv: list[str], **packages: Optional[str]) -> list[megaplug.Problem]:
    """The problems of a resolve that must fail."""
    try:
        resolve(argv, **packages)
    except megaplug.ConfigError as error:
        return list(error.problems)
    raise AssertionError(f"resolve of {argv} succeeded")


def messages(argv: list[str], **packages: Optional[str]) -> list[str]:
    return [p.message for p in problems(argv, **packages)]


def warnings_of(resolved: megaplug.Resolved) -> list[str]:
    return [w.message for w in resolved.warnings]


def megatron_facts() -> dict[tuple[str, ...], dict[str, Any]]:
    """Megatron's parser facts by option strings."""
    facts = [json.loads(line) for line in FLAGS_JSONL.read_text().splitlines() if line.strip()]
    return {tuple(f["option_strings"]): f for f in facts}


def seed_only_options() -> set[str]:
    return set(SEED_ONLY.read_text().split())


_ACTIONS = {"_StoreAction": "store", "_StoreTrueAction": "store_true",
            "_StoreFalseAction": "store_false"}


def fact_mismatches(plugin: str) -> list[str]:
    """Differences between this plugin's declared flags and Megatron's facts."""
    facts = megatron_facts()
    seed_only = seed_only_options()
    found = []
    for spec in kernel().table.plugin_specs(plugin):
        if spec.kind != "flag":
            continue
        fact = facts.get(spec.option_strings)
        if fact is None:
            if spec.option_strings[0] not in seed_only:
                found.append(f"{spec.primary}: not a Megatron flag")
            continue
        megatron_type = fact["type"].rsplit(".", 1)[-1] if fact["type"] else None
        if megatron_type == "enum_type_handler":
            megatron_type = "AttnBackend"
        ours = {
            "dest": spec.dest, "action": spec.action, "default": encode(spec.default),
            "choices": encode(spec.choices) if spec.choices else None,
            "nargs": spec.nargs, "type": spec.type_name,
        }
        theirs = {
            "dest": fact["dest"], "action": _ACTIONS[fact["action"]], "default": fact["default"],
            "choices": fact["choices"], "nargs": fact["nargs"] if fact["nargs"] != 0 else None,
            "type": megatron_type,
        }
        for key, value in theirs.items():
            if ours[key] != value:
                found.append(f"{spec.primary} {key}: ours {ours[key]!r}, Megatron {value!r}")
    return found
