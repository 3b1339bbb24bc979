"""Issue 31, class 1: a warm cache never changes an answer.

Every command runs in its own process three ways -- with ``MEGAPLUG_NO_CACHE=1``, on an
empty cache directory (cold), and again on the directory it filled (warm) -- and stdout, stderr and the exit status must be identical byte for byte. The
checkpoint the commands read is written the way a user's run writes one without
megatron.core: ``torch.save({"args": parse_and_validate_args(...)})``, so its saved
arguments hold megaplug's stand-in enums (``InferenceCudaGraphScope``, which a plugin
derives and no flag declares). Reading it once depended on which plugin modules the
process had imported, and a warm cache imports fewer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

torch = pytest.importorskip("torch")

LAUNCH = [*MINIMAL, "--cuda-graph-impl", "local", "--inference-cuda-graph-scope", "block"]

#: Variables that would make the runs differ for reasons other than the cache.
_DROPPED = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_PLUGINS", "MEGAPLUG_DISABLE",
            "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD", "MEGAPLUG_NO_CACHE", "MEGAPLUG_CACHE_DIR",
            "MEGAPLUG_PREFLIGHT")


def write_checkpoint(directory: Path, argv: list[str]) -> Path:
    """A checkpoint in Megatron's layout whose ``args`` is the facade's namespace."""
    from megaplug.megatron import parse_and_validate_args

    with resolve_environment():
        args = parse_and_validate_args(argv=argv, environ={}, register=False)
    iteration = directory / "iter_0000007" / "mp_rank_00"
    iteration.mkdir(parents=True)
    (directory / "latest_checkpointed_iteration.txt").write_text("7")
    torch.save({"args": args, "checkpoint_version": 3.0, "iteration": 7},
               iteration / "model_optim_rng.pt")
    return directory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("round3-cache")
    saved = write_checkpoint(root / "ckpt", LAUNCH)
    import megaplug
    from megaplug.megatron import _checkpoint

    # the point of the test: the saved arguments hold a stand-in enum no flag declares
    kernel, _ = megaplug.load()
    state = _checkpoint.load_saved_state(_checkpoint.checkpoint_file(saved),
                                         _checkpoint.declared_enum_types(kernel))
    assert type(state["args"].inference_cuda_graph_scope).__module__ == "megaplug_inference.enums"
    return saved


def commands(checkpoint: Path) -> dict[str, list[str]]:
    """The commands compared, as ``python -m megaplug`` arguments (or ``-c`` code)."""
    resume = [*MINIMAL, "--use-checkpoint-args", "--load", str(checkpoint)]
    api = ("import megaplug.megatron as m, sys; a = m.parse_and_validate_args(argv=sys.argv[1:], "
           "environ={}, register=False, torch_types=False); "
           "print(a.num_layers, a.inference_cuda_graph_scope, m.provenance(a)['num_layers'])")
    return {
        "resolve": ["-m", "megaplug", "resolve", "--", *LAUNCH],
        "resolve-checkpoint": ["-m", "megaplug", "resolve", "--", *resume],
        "resolve-given-checkpoint": ["-m", "megaplug", "resolve", "--given", "--format", "yaml",
                                     "--", *resume],
        "explain": ["-m", "megaplug", "explain", "inference_cuda_graph_scope", "--", *LAUNCH],
        "explain-checkpoint": ["-m", "megaplug", "explain", "normalization", "--", *resume],
        "diff-checkpoint-command-line": ["-m", "megaplug", "diff", str(checkpoint), "--",
                                         *LAUNCH, "--num-layers", "4"],
        "diff-checkpoint-resume": ["-m", "megaplug", "diff", str(checkpoint), "--", *resume],
        "api-checkpoint": ["-c", api, *resume],
    }


def run(arguments: list[str], cache: Path | None) -> tuple[int, str, str]:
    env = {key: value for key, value in os.environ.items() if key not in _DROPPED}
    if cache is None:
        env["MEGAPLUG_NO_CACHE"] = "1"
    else:
        env["MEGAPLUG_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, *arguments], env=env, capture_output=True,
                          timeout=300)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def test_every_answer_is_the_same_cold_warm_and_without_a_cache(checkpoint, tmp_path):
    chosen = commands(checkpoint)
    uncached = {name: run(arguments, None) for name, arguments in chosen.items()}
    # each command on an empty cache, then again on the cache it filled
    cold = {name: run(arguments, tmp_path / name) for name, arguments in chosen.items()}
    warm = {name: run(arguments, tmp_path / name) for name, arguments in chosen.items()}
    for name in chosen:
        assert cold[name] == uncached[name], name
        assert warm[name] == uncached[name], name
    # and the answers are the ones a resume means: the checkpoint is read, not refused
    assert uncached["resolve-checkpoint"][0] == 0, uncached["resolve-checkpoint"][2]
    assert uncached["diff-checkpoint-resume"][0] == 0
    assert "checkpoint arguments" in uncached["explain-checkpoint"][1]
    assert uncached["api-checkpoint"][1].split()[:2] == ["2", "InferenceCudaGraphScope.none"]
    assert '"inference_cuda_graph_scope"' not in uncached["resolve-given-checkpoint"][1]


def test_the_allow_list_does_not_depend_on_what_was_imported(checkpoint):
    """In one process: the plugin enum classes found are the same before and after every
    plugin module was imported, and include the derived enum no flag declares."""
    code = ("import sys, megaplug; from megaplug.megatron import _checkpoint as c; "
            "k, _ = megaplug.load(); "
            "mods = [r.module for r in k.plugins.active() if r.module is not None]; "
            "before = 'megaplug_inference.enums' in sys.modules; "
            "first = sorted(f'{t.__module__}.{t.__qualname__}' for t in c.plugin_enum_types(mods)); "
            "c._PACKAGE_ENUMS.clear(); "
            "again = sorted(f'{t.__module__}.{t.__qualname__}' for t in c.plugin_enum_types(mods)); "
            "print(before, first == again, "
            "'megaplug_inference.enums.InferenceCudaGraphScope' in first)")
    status, out, err = run(["-c", code], None)
    assert status == 0, err
    assert out.split()[1:] == ["True", "True"]
