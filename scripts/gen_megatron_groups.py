"""Measure src/megaplug/megatron/megatron_groups.json: which settings each of Megatron's
``_add_*_args`` group adders declares.

Run in the Megatron tier's environment
(``.venv-megatron/bin/python scripts/gen_megatron_groups.py``):
the pinned megatron-core release is called for the adders it has; flags only the newer seed
declares are placed by the seed's text (the adder whose body names the flag).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED = ROOT.parent / "shared" / "seed" / "arguments_linebroken.txt"
OUT = ROOT / "src" / "megaplug" / "megatron" / "megatron_groups.json"


def released_adders() -> dict[str, list[str]]:
    import megatron.training.arguments as arguments

    adders = {}
    for name, function in inspect.getmembers(arguments, inspect.isfunction):
        if name.startswith("_add_") and function.__module__ == arguments.__name__:
            parser = argparse.ArgumentParser(add_help=False)
            function(parser)
            adders[name] = [action.dest for action in parser._actions]
    return adders


def seed_placement() -> dict[str, str]:
    """Option string -> the seed adder whose body declares it."""
    placement, current = {}, None
    for line in SEED.read_text().splitlines():
        match = re.match(r"def (_add_\w+)\(", line)
        if match:
            current = match.group(1)
        elif line.startswith("def "):
            current = None
        if current:
            for option in re.findall(r"['\"](--[a-z0-9][a-z0-9-]*)['\"]", line):
                placement.setdefault(option, current)
    return placement


def measured_titles() -> dict[str, str]:
    """Dest -> the argparse group title measured on Megatron's parser (shared/megatron)."""
    import json

    facts = ROOT.parent / "shared" / "megatron" / "flags.jsonl"
    return {fact["dest"]: fact["group"]
            for fact in map(json.loads, facts.read_text().splitlines())}


def main() -> None:
    from megaplug import load

    adders = released_adders()
    table = load(())[0].table
    placed = {dest for dests in adders.values() for dest in dests}
    seed = seed_placement()
    for spec in table:
        if spec.kind != "flag" or spec.dest in placed or spec.plugin not in _MEGATRON_PLUGINS:
            continue
        for option in spec.option_strings:
            if option in seed:
                adders.setdefault(seed[option], []).append(spec.dest)
                placed.add(spec.dest)
                break
    by_title = measured_titles()
    title_adder: dict[str, dict[str, int]] = {}
    for name, dests in adders.items():
        for dest in dests:
            if dest in by_title:
                counts = title_adder.setdefault(by_title[dest], {})
                counts[name] = counts.get(name, 0) + 1
    for spec in table:
        if spec.kind != "flag" or spec.dest in placed or spec.plugin not in _MEGATRON_PLUGINS:
            continue
        title = by_title.get(spec.dest, "")
        counts = title_adder.get(title) or TITLES_ONLY_IN_NEWER_MEGATRON.get(title)
        if counts:
            adders[max(counts, key=counts.__getitem__)].append(spec.dest)
            placed.add(spec.dest)
        else:
            print(f"not placed: {spec.dest} (plugin {spec.plugin})")
    OUT.write_text(json.dumps({
        "about": "Which settings each of Megatron's _add_*_args group adders declares, "
                 "measured by scripts/gen_megatron_groups.py from megatron-core's released "
                 "adders and the seed's text.",
        "adders": {name: list(dict.fromkeys(adders[name])) for name in sorted(adders)}},
        indent=1) + "\n")
    print(f"wrote {OUT}: {len(adders)} adders, {len(placed)} settings")


#: Group titles the pinned release lacks, by the adder that creates them in Megatron-LM's main.
TITLES_ONLY_IN_NEWER_MEGATRON = {"opentelemetry": {"_add_logging_args": 1}}

_MEGATRON_PLUGINS = {"model", "parallel", "precision", "training", "checkpointing", "data",
                     "logging", "resilience", "experimental", "moe", "mla", "fsdp", "gtp",
                     "inference", "rl", "distillation", "kitchen"}

if __name__ == "__main__":
    main()
