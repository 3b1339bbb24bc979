"""Calibrate `megaplug plan`'s compute term on single-GPU slices: measured iteration time of
one rank (the fake process group moves no data, so the time is its compute) against the cost
model's compute at full efficiency; prints each point and the fitted efficiency's spread.

    python plugins/megaplug-memory/scripts/compute_calibration.py tests/data/raw/*.jsonl

docs/plan.md holds its output.
"""

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus import _resolved  # noqa: E402

from megaplug_memory.estimator import Job  # noqa: E402
from megaplug_memory.plan import COST, Layout, cost_terms  # noqa: E402


def ideal_seconds(values: dict) -> float:
    """The cost model's compute term for this job at efficiency 1."""
    job = Job(values)
    recompute = {"selective": "selective"}.get(values.get("recompute_granularity"), "none")
    if values.get("recompute_granularity") == "full":
        recompute = values.get("recompute_method") or "uniform"
    layout = Layout(job.tp, job.cp, job.pp, job.vpp, job.ep, job.etp, job.dp, job.micro_batch,
                    recompute, job.recompute_layers)
    global_batch = int(values.get("global_batch_size") or job.micro_batch * job.dp)
    terms = cost_terms(job, layout, job.world, 8, global_batch, {**COST, "efficiency": 1.0})
    return terms["compute"]


def main() -> None:
    rows = []
    for path in sys.argv[1:]:
        for line in open(path):
            raw = json.loads(line)
            times = raw.get("seconds_per_iteration") or []
            if raw.get("status") != "ok" or len(times) < 3 or raw.get("moe_skew"):
                continue
            values = _resolved(tuple(raw["common"] + raw["argv"]), raw["world_size"],
                               raw["rank"])
            measured = statistics.median(times[1:])
            efficiency = ideal_seconds(values) / measured
            rows.append((raw["name"], measured, efficiency))
            print(f"| {raw['name']} | {measured:.3f} | {efficiency:.3f} |")
    fitted = statistics.median(e for _, _, e in rows)
    errors = [abs(fitted / e - 1) for _, _, e in rows]
    print(f"\n{len(rows)} points; efficiency median {fitted:.3f} (min "
          f"{min(e for _, _, e in rows):.3f}, max {max(e for _, _, e in rows):.3f}); "
          f"compute term's error at the median: median {100 * statistics.median(errors):.0f}%,"
          f" max {100 * max(errors):.0f}%")


if __name__ == "__main__":
    main()
