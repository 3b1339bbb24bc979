"""scripts/gpu-multi.sh without GPUs: every layout resolves at its world size, and the
model-build refusal is made alike by every rank (the multi-GPU issue's CPU half)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_resolves_every_layout_and_refuses_alike_on_every_rank(tmp_path: Path) -> None:
    env = {**os.environ, "DRY_RUN": "1", "PYTHON": sys.executable, "OUT": str(tmp_path),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-multi.sh")], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout.split("== summary (0 GPU(s), dry run)")[1].split()
    assert summary == ["tp2-dry-run", "PASS", "pp2-vpp2-dry-run", "PASS", "tp2-dp2-dry-run",
                       "PASS", "refused-alike-on-every-rank-before-the-model", "PASS"]
    assert ("resolved: world_size=4, tensor_model_parallel_size=2, pipeline_model_parallel_size"
            "=1, virtual_pipeline_model_parallel_size=None, data_parallel_size=2") in result.stdout
    assert "virtual_pipeline_model_parallel_size=2, data_parallel_size=1" in result.stdout
    refusal = (tmp_path / "gpu-multi" / "refused-1.txt").read_text()
    assert "--num-attention-heads 9 cannot be split over --tensor-model-parallel-size 2" in refusal
    assert refusal == (tmp_path / "gpu-multi" / "refused-0.txt").read_text()
    assert "-m megaplug.megatron pretrain_gpt.py" in result.stdout
