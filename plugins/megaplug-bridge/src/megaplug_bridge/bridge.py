"""``--to bridge``: a Megatron-Bridge ``ConfigContainer`` YAML for the launch.

Megatron-Bridge 0.6's section classes (``TrainingConfig``, ``OptimizerConfig``,
``CheckpointConfig``, ...) subclass Megatron-LM's own (``megatron.training.config``), and
its model providers subclass Megatron's ``TransformerConfig``. So export builds Megatron's
own container for the launch first (:func:`.mlm_config.build_container`: the release's
builders, from megaplug's resolved namespace), then writes each section as the Bridge class
of that section, field by field from the list measured from Bridge's code
(``data/bridge-VERSION.json``, ``scripts/measure_bridge_fields.py``): a field both classes
have takes Megatron's value, a Bridge-only field Bridge's own default, each written
explicitly; a Megatron field Bridge's class lacks is named when a given flag set it. The
model section is flat in Bridge (a provider is a ``TransformerConfig``): Megatron's
``model`` and ``model.transformer`` fields together. The dataset and tokenizer sections,
which Megatron 0.19's container lacks, are filled from the namespace by field name.
Bridge itself is not needed (its field list is data); Megatron's code is, as for
``--to mlm-config``.
"""

from __future__ import annotations

import functools
import importlib.resources
import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Mapping

from .mlm_config import Exported, build_container, container_yaml, read_container_file

#: Megatron's sections that are Bridge's under the same name.
SAME_SECTIONS = ("rng", "rerun_state_machine", "train", "optimizer", "ddp", "scheduler",
                 "logger", "checkpoint", "dist", "profiling")
#: Bridge's field -> the namespace attribute it holds, where the names differ.
RENAMED_FROM_ARGS = {
    "dataset": {"random_seed": "seed", "sequence_length": "seq_length",
                "seq_length": "seq_length"},
    "tokenizer": {},
}
#: The container's own top-level fields export writes, and why each has that value.
TOP_LEVEL = {
    "mixed_precision": None,  # the precision is in the model/optimizer/ddp fields already
    "comm_overlap": None,     # Megatron's flags set each overlap in ddp/optimizer/model
}
#: The flags that pick the activation function, which this YAML carries (Megatron's not).
ACTIVATION_FLAGS = ("squared_relu", "quick_geglu")
#: The activation functions import reads back as the flag that picks them (SiLU with a
#: gated linear unit is --swiglu, read from ``gated_linear_unit``; GELU the default).
ACTIVATION_READ = {"megatron.core.activations.squared_relu": "squared_relu"}
NO_FIELD = ("Megatron-Bridge {version}'s {cls} has no field {field} (Megatron-LM's "
            "{section} section has)")
MOCK_DATA = ("Bridge's GPTDatasetConfig has no field for it: its blend is null, as for no "
             "data flag at all (Bridge's mock data is a class, MockGPTDatasetConfig)")
NEEDS_VERSION = ("--to bridge writes the ConfigContainer of one Megatron-Bridge release: "
                 "install megatron-bridge or give its version with --assume "
                 "megatron_bridge=VERSION (measured: {known})")


@functools.cache
def _measured() -> dict[str, Any]:
    """Every measured Bridge release's sections, by version."""
    found = {}
    for entry in importlib.resources.files("megaplug_bridge").joinpath("data").iterdir():
        if entry.name.startswith("bridge-") and entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            found[data["megatron_bridge"]] = data["sections"]
    return found


def bridge_sections(target: Any) -> tuple[str, dict[str, Any]]:
    """(the Bridge version, its measured sections): the version assumed for the target,
    else the one installed here. Raises ``ValueError`` when neither is one measured."""
    import importlib.metadata

    version = target.package_version("megatron_bridge") if target is not None else None
    if version is None:
        try:
            version = importlib.metadata.version("megatron-bridge")
        except importlib.metadata.PackageNotFoundError:
            version = None
    known = _measured()
    if version not in known:
        raise ValueError(NEEDS_VERSION.format(known=", ".join(sorted(known)))
                         + (f"; {version} is not measured" if version else ""))
    return version, known[version]


def export(launch: Mapping[str, Any], output_format: str) -> Exported:
    """The launch as a Megatron-Bridge ``ConfigContainer`` (``yaml``), or JSON holding it
    and what has no home in it (``json``); ``launch`` as :func:`.mlm_config.export` takes
    it. Raises ``ValueError`` saying why it cannot."""
    from .mlm_config import _not_exported, given, given_as, require_megatron, resolved_namespace

    require_megatron("bridge")
    version, sections = bridge_sections(launch["target"])
    from megaplug.megatron import provenance

    namespace = resolved_namespace(launch)
    config, read, dropped = bridge_config(namespace, launch["target"], version, sections)
    records = provenance(namespace)
    written = set(ACTIVATION_FLAGS) if "activation_func" in config["model"] else set()
    not_exported = [row for row in _not_exported(records, read, [])
                    if row["dest"] not in dropped and row["dest"] not in written]
    not_exported += [{"flag": given_as(records[dest], dest), "dest": dest,
                      "plugin": records[dest].plugin, "reason": reason}
                     for dest, reason in sorted(dropped.items()) if given(records.get(dest))]
    import yaml

    if output_format == "json":
        from megaplug.values._encoding import to_json

        text = to_json({"format": "bridge", "megatron_bridge": version, "config": config,
                        "not_exported": not_exported}) + "\n"
    else:
        text = str(yaml.safe_dump(config, default_flow_style=False))
    return Exported(text, not_exported)


def bridge_config(namespace: argparse.Namespace, target: Any, version: str,
                  sections: Mapping[str, Any]) -> tuple[dict[str, Any], set[str],
                                                        dict[str, str]]:
    """The ``ConfigContainer`` as a YAML mapping, the namespace attributes read for it, and
    the fields Megatron's container has that Bridge's classes lack ({field: why})."""
    import yaml

    container, read, left_out = build_container(namespace, target)
    if left_out:  # no vocabulary: Bridge's container has no optional model
        raise ValueError(left_out[0]["reason"])
    megatron = yaml.safe_load(container_yaml(container))
    dropped: dict[str, str] = {}
    config: dict[str, Any] = {"_target_": "megatron.bridge.training.config.ConfigContainer"}
    for section in SAME_SECTIONS + (("validation",) if "validation" in megatron else ()):
        config[section] = _section(megatron.get(section) or {}, sections[section], section,
                                   version, dropped)
    config["model"] = _model(megatron["model"], sections, version, dropped)
    activation = _function(container.model.transformer.activation_func)
    if activation is not None:  # Megatron's YAML leaves it out; Bridge's loads it
        config["model"]["activation_func"] = activation
    for section in ("dataset", "tokenizer"):
        config[section] = _from_args(namespace, sections[section], section, read)
    config["dataset"]["blend"] = _blend(namespace, read, dropped)
    config.update(TOP_LEVEL)
    return config, read, dropped


def _function(function: Any) -> dict[str, Any] | None:
    """A function as Megatron's YAML representers write one (``_call_: false``: the object
    itself, not its result), where its module and name find it again; else ``None``."""
    import importlib

    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    try:
        found = functools.reduce(getattr, name.split("."), importlib.import_module(str(module)))
    except (ImportError, AttributeError, ValueError):
        return None
    return {"_target_": f"{module}.{name}", "_call_": False} if found is function else None


def _section(values: Mapping[str, Any], measured: Mapping[str, Any], section: str,
             version: str, dropped: dict[str, str]) -> dict[str, Any]:
    """Bridge's class of the section, each field Megatron's value where it has one, else
    Bridge's default; Megatron's fields Bridge lacks noted in ``dropped``."""
    out: dict[str, Any] = {"_target_": measured["_target_"]}
    fields = measured["fields"]
    for name, spec in fields.items():
        if name in values:
            out[name] = values[name]
        elif "default" in spec:
            out[name] = spec["default"]
    # a dtype, enum member or function: Megatron's value where its YAML writes one
    out.update({name: values[name] for name in measured["opaque"] if name in values})
    cls = measured["_target_"].rpartition(".")[2]
    for name in values:
        if not name.startswith("_") and name not in fields and name not in measured["opaque"]:
            dropped[name] = NO_FIELD.format(version=version, cls=cls, field=name,
                                            section=section)
    return out


def _model(model: Mapping[str, Any], sections: Mapping[str, Any], version: str,
           dropped: dict[str, str]) -> dict[str, Any]:
    """The model provider: GPT's, or MLA's / the hybrid's where Megatron built those."""
    transformer = dict(model.get("transformer") or {})
    kind = "model"
    if str(transformer.get("_target_", "")).endswith(".MLATransformerConfig"):
        kind = "model/mla"
    elif str(model.get("_target_", "")).endswith(".HybridModelConfig"):
        kind = "model/hybrid"
    flat = {**transformer, **{name: value for name, value in model.items()
                              if name != "transformer"}}
    return _section(flat, sections[kind], "model", version, dropped)


def _from_args(namespace: Any, measured: Mapping[str, Any], section: str,
               read: set[str]) -> dict[str, Any]:
    """A section Megatron's container lacks: each field the namespace attribute of that
    name (or of :data:`RENAMED_FROM_ARGS`'s), else Bridge's default."""
    from megaplug.values._encoding import encode

    out: dict[str, Any] = {"_target_": measured["_target_"]}
    renamed = RENAMED_FROM_ARGS[section]
    for name, spec in measured["fields"].items():
        attribute = renamed.get(name, name)
        if hasattr(namespace, attribute):
            read.add(attribute)
            out[name] = encode(getattr(namespace, attribute))
        elif "default" in spec:
            out[name] = spec["default"]
    return out


def _blend(namespace: Any, read: set[str], dropped: dict[str, str]) -> Any:
    """``--data-path`` as Bridge's ``blend`` ([paths, weights]), by Megatron's own helper;
    ``None`` without one -- for --mock-data too, which is then named in ``dropped``: a
    ``null`` blend is also what no data flag writes, so the file cannot say which."""
    paths = getattr(namespace, "data_path", None)
    read.update({"data_path", "mock_data"})
    if getattr(namespace, "mock_data", False):
        dropped["mock_data"] = MOCK_DATA
    if not paths:
        return None
    from megatron.core.datasets.utils import get_blend_from_list

    blend = get_blend_from_list(paths)
    return None if blend is None else [list(blend[0]), blend[1]]


# -- import ------------------------------------------------------------------------------

#: The ``_target_`` of the container this module writes and reads.
CONTAINER_TARGET = "megatron.bridge.training.config.ConfigContainer"


def is_bridge_container(data: Any) -> bool:
    """Whether ``data`` (a parsed YAML mapping) is a Megatron-Bridge ``ConfigContainer``."""
    return isinstance(data, dict) and data.get("_target_") == CONTAINER_TARGET


def as_megatron_container(data: Mapping[str, Any]) -> dict[str, Any]:
    """A Bridge container in the shape of Megatron-LM's own (what :mod:`._container` reads):
    the flat model provider split into Megatron's model fields and its ``transformer``
    (the provider's ``_target_`` saying which: MLA's provider is an MLA transformer)."""
    from ._container import CONTAINER_TARGETS, RENAMED

    model_level = {path.split(".")[1] for path in RENAMED
                   if path.startswith("model.") and not path.startswith("model.transformer.")}
    model_level |= {"vocab_size", "should_pad_vocab"}
    shaped = {**_without_unset_aliases(data), "_target_": CONTAINER_TARGETS[0]}
    model = shaped.get("model")
    if isinstance(model, dict):
        mla = str(model.get("_target_", "")).endswith(".MLAModelProvider")
        transformer = {name: value for name, value in model.items()
                       if name not in model_level and name != "_target_"}
        activation = transformer.pop("activation_func", None)
        if isinstance(activation, dict) and activation.get("_target_") in ACTIVATION_READ:
            transformer[ACTIVATION_READ[activation["_target_"]]] = True
        transformer["_target_"] = ("megatron.core.transformer.transformer_config."
                                   + ("MLATransformerConfig" if mla else "TransformerConfig"))
        # in the file's order, not the set's: the command line import writes follows it
        shaped["model"] = {"_target_": str(model.get("_target_")), "transformer": transformer,
                           **{name: value for name, value in model.items()
                              if name in model_level}}
    return shaped


def _without_unset_aliases(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` less the ``null`` fields another section holds a value for: Bridge keeps
    deprecated aliases (``train.eval_iters`` beside ``validation.eval_iters``) unset."""
    sections = {name: value for name, value in data.items() if isinstance(value, dict)}
    held = {field for section in sections.values() for field, value in section.items()
            if value is not None}
    return {**data, **{name: {field: value for field, value in section.items()
                              if value is not None or field not in held}
                       for name, section in sections.items()}}


def import_config(path: str, overrides: list[str], target: Any,
                  environ: Mapping[str, str] | None = None) -> Any:
    """The Megatron-LM command line reproducing the Bridge ``ConfigContainer`` YAML at
    ``path`` (Hydra-style ``overrides`` applied to Bridge's keys first) on the ``target``
    release; as :func:`.mlm_config.import_config` does for Megatron's own container."""
    from ._container import ContainerError, apply_overrides
    from .mlm_config import imported_from

    data = read_container_file(path, "Bridge config", is_bridge_container,
                               "Megatron-Bridge ConfigContainer", "bridge")
    mistakes = apply_overrides(data, overrides)
    if mistakes:
        raise ContainerError("\n".join(mistakes))
    return imported_from(as_megatron_container(data), path, target, environ)


def read_as_settings(data: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A Bridge ``ConfigContainer``'s settings where megaplug reads a config file
    (``--config``, a SOURCE); ``None`` for a mapping that is not one."""
    if not is_bridge_container(data):
        return None
    from .mlm_config import read_as_settings as read_megatrons

    return read_megatrons(as_megatron_container(data), where)
