"""Turn measure_corpus.py's raw JSON lines into tests/data/corpus.json (the numbers CI checks).

    python scripts/build_corpus.py tests/data/raw/*.jsonl > tests/data/corpus.json

A point is kept when it trained at least 3 iterations (its peak is then the peak after
iteration 3 or later) or ran out of memory; a rank that trained no iteration (see the README)
keeps only its memory after setup, which bounds the weights, gradients and optimizer states.
A later line for the same configuration on the same GPU replaces an earlier one. Each point names the GPU it
ran on and the memory torch reports for it (lines measured before the script recorded them,
batches A-C, ran on the H200: 139.80 GiB, as its out-of-memory messages say).
"""

import json
import sys

#: torch's total for the H200 of batches A-C (the figure in their out-of-memory messages)
H200 = ("NVIDIA H200", int(139.80 * (1 << 30)))

points = {}
for path in sys.argv[1:]:
    for line in open(path):
        raw = json.loads(line)
        peaks = raw.get("peak_after_iteration") or []
        if raw.get("status") == "oom":
            outcome = "oom"
        elif raw.get("status") == "ok" and len(peaks) >= 3:
            outcome = "ok"
        elif raw.get("status") == "ok":
            outcome = "no-iterations"
        else:
            continue
        point = {"name": raw["name"], "world_size": raw["world_size"], "rank": raw["rank"],
                 "argv": raw["common"] + raw["argv"], "outcome": outcome,
                 "peak_allocated_bytes": max(peaks) if outcome == "ok" else None,
                 "peak_by_iteration": peaks,
                 "allocated_after_step_bytes": raw.get("allocated_at_end"),
                 "megatron_estimate_bytes": (raw.get("megatron_estimate_bytes") or [None] * 3)[2],
                 "seconds": raw.get("seconds"),
                 "seconds_per_iteration": raw.get("seconds_per_iteration"),
                 "max_reserved_bytes": raw.get("max_reserved"),
                 "inactive_split_peak_bytes": raw.get("inactive_split_peak"),
                 "alloc_conf": raw.get("alloc_conf", (raw.get("env") or {}).get(
                     "PYTORCH_CUDA_ALLOC_CONF", "")),
                 "device": raw.get("device", H200[0]),
                 "device_memory_bytes": raw.get("device_total_bytes", H200[1])}
        if outcome == "oom":
            point["error"] = raw.get("error", "")[:200]
        points[raw["name"], point["device"]] = point
json.dump({"devices": "NVIDIA H200 143771 MiB (139.8 GiB usable by torch), NVIDIA H100 80GB HBM3 "
                      "81559 MiB (79.18 GiB); driver 580.159.04",
           "megatron": "Megatron-LM main d98e8a64dd, pretrain_gpt.py, --transformer-impl local",
           "points": list(points.values())}, sys.stdout, indent=1)
sys.stdout.write("\n")
