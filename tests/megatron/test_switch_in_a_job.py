"""The switch in a real job, on Megatron's own code (issue 29; issue 31, class 9).

Inside the training process the target is the process: with Transformer Engine absent,
RoPE with its fusion on (Megatron's default) is refused by pre-flight -- on by default under
the switch -- on every rank alike, before any model is built; Megatron's own arguments let
it through to "apply_rope_fusion is not available" when it builds the model; the same launch
checked from a login node (``megaplug resolve`` without ``--assume``) keeps today's verdict.
The switch prints Megatron's argument table on rank 0 only, and leaves an entry script its
own ``-p/--port``, ``--config`` and ``--help``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from test_surface import SMALL

ENTRY = Path(__file__).resolve().parent / "entry"
ROPE = [*SMALL["argv"], "--position-embedding-type", "rope"]
ROPE_REFUSED = ("[preflight] RoPE fusion (on by default) requires transformer_engine >= 1.4, "
                "not installed; Megatron would raise this when building the model")
TITLE = "------------------------ arguments ------------------------\n"

pytestmark = pytest.mark.skipif(importlib.util.find_spec("transformer_engine") is not None,
                                reason="Transformer Engine is installed here")


def launch(command: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, timeout=300,
        env={**SMALL["env"], "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
             "PYTHONPATH": ":".join(sys.path), **env})


def switch(script: str, argv: list[str], tmp_path: Path, **env: str):
    return launch(["-m", "megaplug.megatron", str(ENTRY / script), *argv], tmp_path, **env)


def test_rope_fusion_without_transformer_engine_is_refused_by_every_rank_before_the_model(
        tmp_path):
    ranks = [switch("pretrain_tiny.py", ROPE, tmp_path, RANK=str(rank), WORLD_SIZE="2",
                    LOCAL_RANK=str(rank)) for rank in (0, 1)]
    for completed in ranks:
        assert completed.returncode == 2, completed.stderr[-3000:]
        assert ROPE_REFUSED in completed.stderr
        assert completed.stdout == ""  # no table, and no model configuration was built
    assert len({completed.stderr.split("error: ", 1)[1] for completed in ranks}) == 1
    # Megatron's own arguments: through to the model configuration, which fails there
    own = launch([str(ENTRY / "pretrain_tiny.py"), *ROPE], tmp_path)
    assert own.returncode != 0
    assert "apply_rope_fusion is not available. Please install TE >= 1.4." in own.stderr
    # switched off: the log says so once, and Megatron fails as it does on its own
    off = switch("pretrain_tiny.py", ROPE, tmp_path, MEGAPLUG_PREFLIGHT="0")
    assert off.stdout.count("megaplug: pre-flight checks are off (MEGAPLUG_PREFLIGHT=0)") == 1
    assert "apply_rope_fusion is not available. Please install TE >= 1.4." in off.stderr


def test_a_login_node_keeps_todays_verdict_on_the_same_launch(tmp_path):
    login = launch(["-m", "megaplug", "resolve", "--", *ROPE], tmp_path)
    assert login.returncode == 0, login.stderr  # Transformer Engine unknown: not judged
    stated = launch(["-m", "megaplug", "resolve", "--assume", "transformer_engine=none", "--",
                     *ROPE], tmp_path)
    assert stated.returncode == 2 and ROPE_REFUSED in stated.stderr


def test_the_switch_prints_megatrons_table_on_rank_0_only(tmp_path):
    rank0 = switch("pretrain_tiny.py", SMALL["argv"], tmp_path)
    assert rank0.returncode == 0, rank0.stderr[-3000:]
    assert rank0.stdout.count(TITLE) == 1 and rank0.stdout.startswith(TITLE)
    assert f"  tiny_knob {'.' * 39} 3\n" in rank0.stdout  # the script's own setting too
    rank1 = switch("pretrain_tiny.py", SMALL["argv"], tmp_path, RANK="1", WORLD_SIZE="2")
    assert rank1.returncode == 0, rank1.stderr[-3000:]
    assert TITLE not in rank1.stdout
    assert json.loads(rank1.stdout.strip().splitlines()[-1])["tiny_knob"] == 3


def test_the_switch_names_the_exact_release_of_its_table_on_stderr_on_rank_0(tmp_path):
    """The table on standard output stays Megatron's; which release its arguments are for
    is one line on standard error, on rank 0 only."""
    import megaplug

    installed = megaplug.TargetEnvironment().line_choice("megatron_core")
    said = f"megaplug: arguments for Megatron {installed.describe()}\n"
    assert installed.version and installed.source == "imported megatron.core"
    rank0 = switch("pretrain_tiny.py", SMALL["argv"], tmp_path)
    assert rank0.returncode == 0, rank0.stderr[-3000:]
    assert rank0.stderr.count(said) == 1 and said not in rank0.stdout
    assert rank0.stdout.startswith(TITLE)
    rank1 = switch("pretrain_tiny.py", SMALL["argv"], tmp_path, RANK="1", WORLD_SIZE="2")
    assert rank1.returncode == 0 and "megaplug: arguments for" not in rank1.stderr


def test_the_scripts_own_flags_are_the_scripts(tmp_path):
    served = switch("serve_tiny.py", [*SMALL["argv"], "-p", "8080", "--config", "x.yaml"],
                    tmp_path)
    assert served.returncode == 0, served.stderr[-3000:]
    report = json.loads(served.stdout.strip().splitlines()[-1])
    assert report == {"port": 8080, "config": "x.yaml", "num_layers": 4}
    helped = switch("serve_tiny.py", ["--help"], tmp_path)
    assert helped.returncode == 0
    assert "-p PORT, --port PORT" in helped.stdout and "--num-layers NUM_LAYERS" in helped.stdout
