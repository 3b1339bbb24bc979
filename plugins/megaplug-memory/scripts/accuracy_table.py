"""Print the measured corpus beside this estimator and Megatron's own (Markdown rows).

    python plugins/megaplug-memory/scripts/accuracy_table.py

Runs anywhere megaplug and this plugin are installed (no GPU): each point's command line is
resolved by megaplug for its rank, then estimated. docs/memory.md holds its output.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from corpus import GIB, device_memory, points, resolved, tolerance  # noqa: E402
from measure_batches import unseen_names  # noqa: E402

from megaplug_memory.estimator import Assumptions, estimate, expandable, usable  # noqa: E402


def _device(point: dict) -> str:
    return "H100" if "H100" in point["device"] else "H200"


def main() -> None:
    unseen = unseen_names()
    print("| point | GPU | rank | measured GiB | megaplug GiB | error | Megatron GiB | error |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    counts = {"ours": 0, "megatron": 0, "n": 0, "oom": 0, "refused": 0}
    for point in points():
        assumptions = Assumptions(expandable_segments=expandable(point.get("alloc_conf")))
        rank = estimate(resolved(point), rank=point["rank"], assumptions=assumptions)[0]
        ours = rank.peak
        megatron = point["megatron_estimate_bytes"]
        name = point["name"] + (" (unseen)" if point["name"] in unseen else "")
        lead = f"| {name} | {_device(point)} | {point['rank']}"
        if point["outcome"] == "oom":
            counts["oom"] += 1
            # refused: the MoE bound plus the allocator's margin over what the device allows
            counts["refused"] += rank.needed > usable(device_memory(point))
            print(f"{lead} | out of memory | {ours / GIB:.1f} (needs {rank.needed / GIB:.1f}) "
                  f"| - | {megatron / GIB:.1f} | - |")
            continue
        if point["outcome"] != "ok":
            continue
        measured = point["peak_allocated_bytes"]
        counts["n"] += 1
        counts["ours"] += abs(ours - measured) <= tolerance(measured)
        counts["megatron"] += abs(megatron - measured) <= tolerance(measured)
        print(f"{lead} | {measured / GIB:.1f} | {ours / GIB:.1f} | "
              f"{100 * (ours - measured) / measured:+.0f}% | {megatron / GIB:.1f} | "
              f"{100 * (megatron - measured) / measured:+.0f}% |")
    print(f"\nwithin 10% or 2 GiB: megaplug {counts['ours']} of {counts['n']}, "
          f"Megatron {counts['megatron']} of {counts['n']}; out of memory refused: "
          f"{counts['refused']} of {counts['oom']}")


if __name__ == "__main__":
    main()
