"""Measure Megatron-Bridge's ConfigContainer sections: each class's ``_target_`` and fields.

Run in the Megatron tier's environment with Bridge importable (scripts/megatron-env.sh's
interop directory on the path); writes ``src/megaplug_bridge/data/bridge-<version>.json``,
which ``megaplug export --to bridge`` reads (no Bridge needed then):

    PYTHONPATH=plugins/megaplug-bridge/tests/megatron:$INTEROP \\
        $ENV/bin/python plugins/megaplug-bridge/scripts/measure_bridge_fields.py

A field's ``default`` is its value when it is plain JSON (a factory's is called); a field
whose default is no such value (a function, a spec) is listed under ``opaque``.
"""

import dataclasses
import importlib
import importlib.metadata
import json
import sys
from pathlib import Path

#: section -> the Bridge class export writes there (module, class).
SECTIONS = {
    "rng": ("megatron.bridge.training.config", "RNGConfig"),
    "rerun_state_machine": ("megatron.bridge.training.config", "RerunStateMachineConfig"),
    "train": ("megatron.bridge.training.config", "TrainingConfig"),
    "validation": ("megatron.bridge.training.config", "ValidationConfig"),
    "optimizer": ("megatron.bridge.training.config", "OptimizerConfig"),
    "ddp": ("megatron.bridge.training.config", "DistributedDataParallelConfig"),
    "scheduler": ("megatron.bridge.training.config", "SchedulerConfig"),
    "dataset": ("megatron.bridge.training.config", "GPTDatasetConfig"),
    "logger": ("megatron.bridge.training.config", "LoggerConfig"),
    "tokenizer": ("megatron.bridge.training.config", "TokenizerConfig"),
    "checkpoint": ("megatron.bridge.training.config", "CheckpointConfig"),
    "dist": ("megatron.bridge.training.config", "DistributedInitConfig"),
    "profiling": ("megatron.bridge.training.config", "ProfilingConfig"),
    "model": ("megatron.bridge.models.gpt_provider", "GPTModelProvider"),
    "model/mla": ("megatron.bridge.models.mla_provider", "MLAModelProvider"),
    "model/hybrid": ("megatron.bridge.models.mamba.mamba_provider", "MambaModelProvider"),
}


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return True, value
    if isinstance(value, (list, tuple)):
        items = [_plain(item) for item in value]
        return all(ok for ok, _ in items), [item for _, item in items]
    if isinstance(value, dict):
        items = {key: _plain(item) for key, item in value.items()}
        return all(ok for ok, _ in items.values()) and all(
            isinstance(key, str) for key in items), {k: v for k, (_, v) in items.items()}
    return False, None


def measure(module_name, class_name):
    cls = getattr(importlib.import_module(module_name), class_name)
    fields, opaque = {}, []
    for field in dataclasses.fields(cls):
        if not field.init or field.name.startswith("_"):
            continue
        if field.default is not dataclasses.MISSING:
            value = field.default
        elif field.default_factory is not dataclasses.MISSING:
            try:
                value = field.default_factory()
            except Exception:  # a probe of this machine (no GPU): not a default to state
                opaque.append(field.name)
                continue
        else:
            fields[field.name] = {"required": True}
            continue
        ok, plain = _plain(value)
        if ok:
            fields[field.name] = {"default": plain}
        else:
            opaque.append(field.name)
    return {"_target_": f"{cls.__module__}.{cls.__qualname__}", "fields": fields,
            "opaque": sorted(opaque)}


def main():
    from bridge_loader import _transformer_engine_stub

    import megatron.training.arguments  # noqa: F401  (megatron-core's TE finding first)

    with _transformer_engine_stub():
        importlib.import_module("megatron.bridge.training.config")
        sections = {}
        for section, (module_name, class_name) in SECTIONS.items():
            try:
                sections[section] = measure(module_name, class_name)
            except (ImportError, AttributeError) as exc:
                print(f"{section}: {exc}", file=sys.stderr)
    version = importlib.metadata.version("megatron-bridge")
    out = Path(__file__).resolve().parents[1] / "src" / "megaplug_bridge" / "data" / \
        f"bridge-{version}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"megatron_bridge": version, "measured_by":
                               "plugins/megaplug-bridge/scripts/measure_bridge_fields.py",
                               "sections": sections}, indent=1, sort_keys=True) + "\n")
    print(out)


if __name__ == "__main__":
    main()
