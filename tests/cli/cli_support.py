"""Helpers of the command-line tests: running ``megaplug`` in and out of process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The toy plugins live beside the kernel tests.
TOYS = ROOT / "tests" / "kernel"

#: A small valid Megatron command line (the full plugin set).
VALID = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2"]


def run(capsys, *argv):
    """``megaplug ARGV`` in this process: (exit code, stdout, stderr)."""
    from megaplug.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TOYS), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def megaplug_process(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    """``python -m megaplug ARGV`` in a fresh process."""
    return subprocess.run([sys.executable, "-m", "megaplug", *argv], capture_output=True,
                          text=True, env=kwargs.pop("env", None) or subprocess_env(), **kwargs)
