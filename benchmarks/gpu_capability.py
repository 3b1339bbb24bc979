"""Check megaplug's torch-free GPU capability against the driver and torch, on a GPU node.

    python benchmarks/gpu_capability.py

For every ``CUDA_VISIBLE_DEVICES`` worth trying (unset, each index, each GPU's UUID and a
prefix of it, none), a fresh process answers with megaplug's NVML reader and, where torch
is installed, another with ``torch.cuda.get_device_capability()``; the answers must agree.
Prints each answer with its time and whether torch was imported. Exits 1 on a mismatch.
Needs only the standard library (and this checkout's ``src``) besides the driver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

MEGAPLUG = """
import json, os, sys, time
started = time.perf_counter()
from megaplug.environment._devices import local_device_capability
answer = local_device_capability(os.environ)
print(json.dumps({"answer": answer, "ms": (time.perf_counter() - started) * 1e3,
                  "torch": "torch" in sys.modules}))
"""

TORCH = """
import json, time
started = time.perf_counter()
import torch
answer = list(torch.cuda.get_device_capability()) if torch.cuda.is_available() else None
print(json.dumps({"answer": answer, "ms": (time.perf_counter() - started) * 1e3}))
"""


def ask(code: str, visible: str | None) -> dict | None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        print(f"    failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def gpu_uuids() -> list[str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=uuid,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    print(f"nvidia-smi: {out.strip()}")
    return [line.split(",")[0].strip() for line in out.strip().splitlines()]


def main() -> int:
    uuids = gpu_uuids()
    has_torch = subprocess.run([sys.executable, "-c", "import torch"],
                               capture_output=True).returncode == 0
    choices: list[str | None] = [None, *map(str, range(len(uuids) + 1)), "", "-1"]
    choices += [uuid for uuid in uuids[:2]] + [uuid[:12] for uuid in uuids[:1]]
    mismatches = 0
    for visible in choices:
        started = time.perf_counter()
        ours = ask(MEGAPLUG, visible)
        process = (time.perf_counter() - started) * 1e3
        line = (f"CUDA_VISIBLE_DEVICES={visible!r:<48} megaplug {ours and ours['answer']} "
                f"({ours and round(ours['ms'], 2)} ms in-process, {process:.0f} ms process, "
                f"torch imported: {ours and ours['torch']})")
        if has_torch:
            theirs = ask(TORCH, visible)
            line += f"; torch {theirs and theirs['answer']} ({theirs and round(theirs['ms'])} ms)"
            if ours is None or theirs is None or ours["answer"] != theirs["answer"]:
                mismatches += 1
                line += "  MISMATCH"
        print(line)
    print(f"{mismatches} mismatches" + ("" if has_torch else " (torch not installed: "
                                        "compare with nvidia-smi above)"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    raise SystemExit(main())
