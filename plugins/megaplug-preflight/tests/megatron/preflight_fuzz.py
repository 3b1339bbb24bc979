"""Measure pre-flight on random mutations of the parity launches (a script, not a test).

    .venv-megatron/bin/python plugins/megaplug-preflight/tests/megatron/preflight_fuzz.py \
        [--seed 7] [--count 3000] [--around-probes]

Each launch is a shared parity case or mutation with one to three random flag settings
(mostly flags that Megatron copies into its model configuration, with values from a small
set that includes edge values such as 0 and -1); ``--around-probes`` instead adds one or two
random settings to every probe of ``preflight_probes``. Megatron judges each launch as the
tier tests do; the script prints every disagreement and the counts: rejections megaplug
catches, controls it accepts.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import random
import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from preflight_probes import BASES, PARITY_DIR, PROBES, apply, load_base, parity_launches  # noqa: E402
from preflight_reference import megatron_verdict, megaplug_problems  # noqa: E402

#: Arguments core_transformer_config_from_args reads under another name than a config field.
MAPPED_ARGUMENTS = {"num_experts", "swiglu", "squared_relu", "quick_geglu", "bias_gelu_fusion",
                    "bias_swiglu_fusion", "group_query_attention", "rope_type",
                    "decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                    "fp8_param_gather", "fp4_param_gather", "cp_comm_type", "hybrid_layer_pattern",
                    "cpu_offloading_num_layers", "num_virtual_stages_per_pipeline_rank",
                    "recompute_activations", "init_method_xavier_uniform"}
INTS = ("-1", "0", "1", "2", "3", "4", "6", "8", "16", "64", "512")
FLOATS = ("-1.0", "0.0", "0.1", "0.5", "1.0", "1.5", "7.0")


def _flags() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from megatron.core.transformer import MLATransformerConfig

    fields = {f.name for f in dataclasses.fields(MLATransformerConfig)} | MAPPED_ARGUMENTS
    facts = [json.loads(line) for line in
             (PARITY_DIR.parent / "megatron" / "flags.jsonl").read_text().splitlines()]
    return [f for f in facts if f["dest"] in fields], [f for f in facts if f["dest"] not in fields]


def _setting(rng: random.Random, fact: dict[str, Any]) -> str | None:
    option, action = fact["option_strings"][0], fact["action"]
    if action in ("_StoreTrueAction", "_StoreFalseAction"):
        return option
    if action == "BooleanOptionalAction":
        return rng.choice([option, "--no-" + option[2:]])
    if fact["choices"]:
        values = [str(c).split(".")[-1] for c in fact["choices"]]
    elif fact["type"] in ("int", "float"):
        values = list(INTS if fact["type"] == "int" else FLOATS)
    else:
        return None
    count = rng.choice([1, 2]) if fact["nargs"] in ("+", "*") else 1
    return " ".join([option, *(rng.choice(values) for _ in range(count))])


def _random_settings(rng: random.Random, model: list, other: list, count: int) -> list[str]:
    picked = (_setting(rng, rng.choice(model if rng.random() < 0.85 else other))
              for _ in range(count))
    return [setting for setting in picked if setting]


def _launches(args: argparse.Namespace, rng: random.Random):
    model, other = _flags()
    if args.around_probes:
        for probe in PROBES:
            for kind in probe.on:
                for base in BASES[kind]:
                    extra = _random_settings(rng, model, other, rng.choice([1, 1, 2]))
                    edits = (*probe.edits, *extra)
                    yield f"{base} {edits}", apply(load_base(base), edits)
        return
    bases = parity_launches()
    for _ in range(args.count):
        name, base = rng.choice(bases)
        edits = tuple(_random_settings(rng, model, other, rng.choice([1, 2, 2, 3])))
        launch = apply(base, edits)
        if rng.random() < 0.3:  # what validate_args asks of offloading and CUDA-graph launches
            launch["env"].update(NVTE_CPU_OFFLOAD_V1="1", NCCL_GRAPH_REGISTER="0")
        yield f"{name} {edits}", launch


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--around-probes", action="store_true")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    tally: collections.Counter[str] = collections.Counter()
    for label, launch in _launches(args, random.Random(args.seed)):
        verdict = megatron_verdict(launch)
        if verdict.stage not in ("ok", "model-config"):
            tally["refused by validate_args (not counted)"] += 1
            continue
        problems = megaplug_problems(launch)
        if verdict.stage == "model-config":
            outcome = "rejection caught" if problems else "REJECTION MISSED"
        else:
            outcome = "control accepted" if not problems else "CONTROL REFUSED"
        tally[outcome] += 1
        if outcome.isupper():
            print(f"{outcome}: {label}\n    Megatron: {verdict.message}", flush=True)
            for problem in problems or []:
                print(f"    megaplug: {problem}", flush=True)
    for outcome, count in sorted(tally.items()):
        print(f"{count:6d}  {outcome}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
