"""Saved arguments are read with a weights-only unpickler and an allow-list, nothing else."""

from __future__ import annotations

import argparse
import enum
import os

import pytest

from megaplug.megatron._checkpoint import (
    CheckpointArgsError,
    apply_checkpoint_args,
    checkpoint_file,
    enum_types,
    load_saved_state,
)


@pytest.fixture(scope="module")
def torch():
    """torch, imported by the tests that need it (not at collection: it costs seconds)."""
    return pytest.importorskip("torch")


class Backend(enum.Enum):
    flash = 1
    auto = 2


def write_checkpoint(directory, state, iteration=10):
    import torch

    path = directory / f"iter_{iteration:07d}" / "mp_rank_00"
    path.mkdir(parents=True)
    torch.save(state, path / "model_optim_rng.pt")
    (directory / "latest_checkpointed_iteration.txt").write_text(str(iteration))
    return path / "model_optim_rng.pt"


def test_reads_namespace_with_enums_and_dtypes(tmp_path, torch):
    saved = argparse.Namespace(num_layers=4, hidden_size=64, params_dtype=torch.bfloat16,
                               attention_backend=Backend.flash, swiglu=True)
    write_checkpoint(tmp_path, {"args": saved, "iteration": 10, "checkpoint_version": 3.0})
    state = load_saved_state(checkpoint_file(tmp_path), [Backend])
    assert state["args"].attention_backend is Backend.flash
    assert state["args"].params_dtype == torch.bfloat16


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_checkpoint_is_refused_and_never_runs(tmp_path, torch):
    marker = tmp_path / "pwned"
    saved = argparse.Namespace(num_layers=4, evil=_Payload(marker))
    write_checkpoint(tmp_path / "ckpt", {"args": saved, "iteration": 1})
    with pytest.raises(CheckpointArgsError, match="outside the allow-list"):
        load_saved_state(checkpoint_file(tmp_path / "ckpt"), [Backend])
    assert not marker.exists()


def test_unlisted_class_is_refused(tmp_path, torch):
    saved = argparse.Namespace(attention_backend=Backend.flash)
    write_checkpoint(tmp_path, {"args": saved, "iteration": 1})
    with pytest.raises(CheckpointArgsError, match="allow-list"):
        load_saved_state(checkpoint_file(tmp_path), [])


def test_missing_tracker_is_a_clear_error(tmp_path):
    with pytest.raises(CheckpointArgsError,
                       match="latest_checkpointed_iteration.txt does not exist"):
        checkpoint_file(tmp_path)


def test_megatron_rules_fill_and_force():
    values = {"num_layers": 2, "hidden_size": None, "swiglu": False,
              "tensor_model_parallel_size": 1}
    saved = argparse.Namespace(num_layers=8, hidden_size=128, swiglu=True,
                               tensor_model_parallel_size=4, disable_bias_linear=True)
    changed, problems = apply_checkpoint_args(values, saved, version=3.0,
                                              use_parallel_layout=True,
                                              convert=lambda name, raw: raw)
    assert problems == {}
    assert values["num_layers"] == 2            # given on the command line: kept
    assert values["hidden_size"] == 128         # unset: filled
    assert values["swiglu"] is True             # architecture: forced
    assert values["add_bias_linear"] is False   # converted from disable_bias_linear
    assert values["tensor_model_parallel_size"] == 4
    assert set(changed) == {"hidden_size", "swiglu", "add_bias_linear",
                            "tensor_model_parallel_size"}


def test_enum_types_are_collected_from_defaults_and_choices():
    assert enum_types([Backend.auto, [Backend.flash], 3, None]) == [Backend]


def _cli(*argv, env=None):
    import contextlib
    import io

    from megaplug.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


CORE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "32", "--max-position-embeddings", "32", "--micro-batch-size", "1",
        "--train-iters", "1", "--lr", "1e-4", "--tokenizer-type", "NullTokenizer",
        "--vocab-size", "100"]


def test_explain_and_resolve_take_the_checkpoints_arguments_alike(tmp_path, torch, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    saved = argparse.Namespace(num_layers=6, hidden_size=64, num_attention_heads=4, swiglu=True)
    write_checkpoint(tmp_path, {"args": saved, "checkpoint_version": 3.0, "iteration": 10})
    argv = ["--", *CORE, "--load", str(tmp_path), "--use-checkpoint-args"]
    code, out, _ = _cli("explain", "swiglu", *argv)
    assert code == 0
    assert "value:     true" in out
    assert f"checkpoint {tmp_path}" in out or "checkpoint" in out.split("provenance:")[1]
    code, out, _ = _cli("resolve", "--format", "json", *argv)
    assert code == 0 and '"swiglu": true' in out


def test_reading_saved_args_leaves_torchs_allow_list_as_it_was(tmp_path, torch):
    # Megatron registers Namespace before its own full torch.load of the same checkpoint.
    torch.serialization.add_safe_globals([argparse.Namespace])
    try:
        before = {repr(entry) for entry in torch.serialization.get_safe_globals()}
        write_checkpoint(tmp_path, {"args": argparse.Namespace(num_layers=2)})
        load_saved_state(checkpoint_file(tmp_path), [])
        after = {repr(entry) for entry in torch.serialization.get_safe_globals()}
        assert after == before and repr(argparse.Namespace) in after
    finally:
        torch.serialization.clear_safe_globals()
