"""Write a measuring batch of `megaplug plan`'s picks and of layouts it rejects as not fitting.

    python plugins/megaplug-memory/scripts/plan_batch.py OUT.json

For a dense (Llama-3-8B-like, 32 layers) and an MoE (Mixtral-like, 8 layers) model, runs
`megaplug plan --format json` and keeps its best layouts that Megatron's local path
(`--transformer-impl local`, what the measuring script runs) can train: no tensor or context
parallelism (the local path refuses sequence parallelism, and context parallelism needs
Transformer Engine). Beside each model's top picks, up to two layouts of the best pick's
family that validation accepts and the estimate says do not fit (no recomputation, larger
micro-batches, fewer expert ranks), each checked with `megaplug resolve` and `megaplug
memory`. MoE points are measured under the routing plan judges by where the forced router
can set it (`MEASURE_MOE_SKEW=2`, docs/memory.md). `measure_corpus.py --batch OUT.json`
measures rank 0 (the first stage, every pick's worst) of each; docs/plan.md has the results.
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


def model_flags(model: str, layers: int, seq: int) -> list[str]:
    """The model's flags (``COMMON`` aside, which every command here adds)."""
    dispatcher = ["--moe-token-dispatcher-type", "alltoall"] if model == "mixtral" else []
    return (MODELS[model] + ["--num-layers", str(layers), "--seq-length", str(seq),
                             "--max-position-embeddings", str(seq)] + dispatcher)


def plan(flags: list[str], gpus: int, batch: int) -> dict:
    done = _megaplug("plan", flags, None, "--gpus", str(gpus), "--device-memory", DEVICE,
                     "--global-batch-size", str(batch), "--top", "400", "--format", "json")
    done.check_returncode()
    return json.loads(done.stdout)


def _local_path(layout: dict) -> bool:
    return layout["tp"] == 1 and layout["cp"] == 1


def _with(flags: list[str], changes: dict[str, str | None]) -> list[str]:
    """``flags`` with each flag of ``changes`` set to its value (``None``: left out)."""
    flags = list(flags)
    for flag, value in changes.items():
        if flag in flags:
            index = flags.index(flag)
            del flags[index:index + 2]  # each flag varied here takes one value
        if value is not None:
            flags += [flag, value]
    return flags


def _megaplug(command: str, flags: list[str], gpus: int | None,
              *options: str) -> subprocess.CompletedProcess:
    """``megaplug COMMAND OPTIONS -- COMMON FLAGS``, as rank 0 of ``gpus`` ranks if given."""
    environ = dict(os.environ, CUDA_DEVICE_MAX_CONNECTIONS="1",
                   **({} if gpus is None else {"WORLD_SIZE": str(gpus)}))
    return subprocess.run(["megaplug", command, *options, "--", *COMMON, *flags],
                          capture_output=True, text=True, env=environ)


def _verdict(flags: list[str], gpus: int) -> tuple[bool, bool, int]:
    """(accepted by validation with memory left out, predicted to fit rank 0, its need)."""
    valid = _megaplug("resolve", flags, gpus, "--assume-device-memory", "none").returncode == 0
    answer = json.loads(_megaplug("memory", flags, gpus, "--format", "json", "--rank", "0",
                                  "--assume-device-memory", DEVICE).stdout)
    rank = answer["ranks"][0]
    return valid, bool(rank["fits"]), rank["peak_bound_bytes"] + rank["allocator_margin_bytes"]


def _not_fitting(best: dict, gpus: int, batch: int) -> list[dict]:
    """Layouts of the best pick's family that validation accepts and the estimate says do not
    fit: no recomputation, larger micro-batches (the global batch raised so that interleaving
    still gets a multiple of PP micro-batches), fewer expert ranks."""
    layout, flags = best["layout"], best["argv"][len(COMMON):]
    groups = batch // (layout["mbs"] * layout["dp"])
    candidates = []
    if layout["recompute"] != "none":
        candidates.append(("no-recompute", {"--recompute-granularity": None,
                                            "--recompute-method": None,
                                            "--recompute-num-layers": None}, {"recompute": "none"}))
    for times in (2, 4, 8):
        mbs = layout["mbs"] * times
        candidates.append((f"mbs{mbs}", {"--micro-batch-size": str(mbs), "--global-batch-size":
                                         str(mbs * layout["dp"] * groups)}, {"mbs": mbs}))
        if layout["ep"] > 1:
            ep = layout["ep"] // 4 or 1
            candidates.append((f"ep{ep}-mbs{mbs}", {
                "--micro-batch-size": str(mbs), "--expert-model-parallel-size": str(ep),
                "--global-batch-size": str(mbs * layout["dp"] * groups)}, {"mbs": mbs, "ep": ep}))
    rejected = []
    for label, changes, changed in candidates:
        varied = _with(flags, changes)
        valid, fits, needed = _verdict(varied, gpus)
        if valid and not fits:
            rejected.append({"label": label, "argv": varied, "needed": needed,
                             "layout": dict(layout, **changed)})
    return rejected[:2]


def _routing(layout: dict, model: str) -> dict[str, str]:
    """The routing a MoE point is measured under: the bound plan judges by (an expert rank
    receiving twice its balanced tokens, ``MEASURE_MOE_SKEW=2``) where the forced router can
    set it (top-k within the rank's local experts), else the stand-in's symmetric routing."""
    experts, topk = (int(MODELS[model][MODELS[model].index(flag) + 1])
                     for flag in ("--num-experts", "--moe-router-topk"))
    return {"MEASURE_MOE_SKEW": "2"} if topk <= experts // layout["ep"] else {}


def main() -> None:
    configs = []
    for name, (model, layers, gpus, batch, seq, picks) in JOBS.items():
        answer = plan(model_flags(model, layers, seq), gpus, batch)
        runnable = [row for row in answer["layouts"] if _local_path(row["layout"])][:picks]
        for index, row in enumerate(runnable, start=1):
            configs.append({"name": f"{name}-pick{index}", "world_size": gpus, "rank": 0,
                            "argv": row["argv"][len(COMMON):],
                            "predicted_needed_bytes": row["needed_bytes"],
                            "predicted_seconds": row["seconds_per_iteration"],
                            "layout": row["layout"]})
        for rejected in _not_fitting(runnable[0], gpus, batch):
            configs.append({"name": f"{name}-nofit-{rejected['label']}", "world_size": gpus,
                            "rank": 0, "argv": rejected["argv"],
                            "predicted_needed_bytes": rejected["needed"],
                            "layout": rejected["layout"]})
    for config in configs:
        if "--num-experts" in MODELS[config["name"].split("-")[1]]:
            config["env"] = _routing(config["layout"], config["name"].split("-")[1])
    with open(sys.argv[1], "w") as handle:
        json.dump(configs, handle, indent=1)
    for config in configs:
        print(config["name"], round(config["predicted_needed_bytes"] / 2**30, 1), config["layout"],
              config.get("env", ""))


if __name__ == "__main__":
    main()
