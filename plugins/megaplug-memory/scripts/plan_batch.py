"""Write a measuring batch of `megaplug plan`'s picks and of layouts it rejects as not fitting.

    python plugins/megaplug-memory/scripts/plan_batch.py OUT.json

For a dense (Llama-3-8B-like, 32 layers) and an MoE (Mixtral-like, 8 layers) model, runs
`megaplug plan --format json` and keeps its best layouts that Megatron's local path
(`--transformer-impl local`, what the measuring script runs) can train: no tensor or context
parallelism (the local path refuses sequence parallelism, and context parallelism needs
Transformer Engine). Beside each model's top picks, two layouts of the best pick's family
the plan rejects as not fitting (a micro-batch four and eight times larger, no
recomputation). `measure_corpus.py --batch OUT.json` measures rank 0 (the first stage) of
each; docs/plan.md has the results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from measure_corpus import COMMON, MODELS  # noqa: E402

DEVICE = "79.18GiB"  # torch's total for an 80 GB H100
JOBS = {  # model, layers, GPUs, global batch, sequence length, picks
    "plan-llama8b": ("llama8b", 32, 64, 128, 4096, 3),
    "plan-mixtral": ("mixtral", 8, 32, 64, 4096, 3),
}
SHAPES = ["--tensor-model-parallel-size", "--context-parallel-size"]


def model_argv(model: str, layers: int, seq: int) -> list[str]:
    dispatcher = ["--moe-token-dispatcher-type", "alltoall"] if model == "mixtral" else []
    return (COMMON + MODELS[model] + ["--num-layers", str(layers), "--seq-length", str(seq),
                                      "--max-position-embeddings", str(seq)] + dispatcher)


def plan(argv: list[str], gpus: int, batch: int) -> dict:
    command = ["megaplug", "plan", "--gpus", str(gpus), "--device-memory", DEVICE,
               "--global-batch-size", str(batch), "--top", "400", "--format", "json",
               "--", *argv]
    environ = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=environ, check=True)
    return json.loads(done.stdout)


def _local_path(layout: dict) -> bool:
    return layout["tp"] == 1 and layout["cp"] == 1


def main() -> None:
    configs = []
    for name, (model, layers, gpus, batch, seq, picks) in JOBS.items():
        argv = model_argv(model, layers, seq)
        answer = plan(argv, gpus, batch)
        runnable = [row for row in answer["layouts"] if _local_path(row["layout"])][:picks]
        for index, row in enumerate(runnable, start=1):
            configs.append({"name": f"{name}-pick{index}", "world_size": gpus, "rank": 0,
                            "argv": row["argv"][len(COMMON):],
                            "predicted_needed_bytes": row["needed_bytes"],
                            "predicted_seconds": row["seconds_per_iteration"],
                            "layout": row["layout"]})
        best = runnable[0]
        for times in (4, 8):
            flags = list(best["argv"][len(COMMON):])
            mbs = flags.index("--micro-batch-size", len(argv) - len(COMMON))
            flags[mbs + 1] = str(best["layout"]["mbs"] * times)
            configs.append({"name": f"{name}-rejected-mbs{best['layout']['mbs'] * times}",
                            "world_size": gpus, "rank": 0, "argv": flags,
                            "layout": dict(best["layout"], mbs=best["layout"]["mbs"] * times)})
    with open(sys.argv[1], "w") as handle:
        json.dump(configs, handle, indent=1)
    for config in configs:
        print(config["name"], config["layout"])


if __name__ == "__main__":
    main()
