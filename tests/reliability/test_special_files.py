"""Every path megaplug reads takes regular files only, capped, and never blocks.

A FIFO (with no writer: reading it would wait forever), ``/dev/zero`` and ``/dev/urandom``
(endless), and a directory are each given as ``--config``, ``--defaults @FILE``, a
heterogeneous layers config, a checkpoint tracker and a checkpoint file: each is a problem
naming the path. A tracker holding non-digits, 5,000 digits or bytes that are not text, and
a ``.pt`` that is empty or not a checkpoint are clear problems, and the warning that a
checkpoint was skipped reaches the user even when the resolve fails for another reason.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
import megaplug.megatron
from megaplug.megatron import _checkpoint
from megaplug.cli import main
from megaplug.sources._files import UntrustedInputError, read_regular_file, read_text_file

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs and /dev are POSIX")

NO_GPU = megaplug.TargetEnvironment(device_capability=None)


@pytest.fixture
def special(tmp_path: Path) -> dict[str, str]:
    """Special files by kind: what each must be reported as."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    return {str(fifo): "FIFO", "/dev/zero": "character device",
            "/dev/urandom": "character device", str(tmp_path): "directory"}


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def test_the_reader_refuses_special_files_without_blocking(special: dict[str, str]) -> None:
    for path, kind in special.items():
        with pytest.raises(UntrustedInputError, match=kind):
            read_regular_file(path, "config file")


def test_the_reader_caps_the_size(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"a" * 101)
    with pytest.raises(UntrustedInputError, match="101 bytes; megaplug reads at most 100"):
        read_regular_file(path, "config file", limit=100)
    assert read_regular_file(path, "config file", limit=101) == b"a" * 101


def test_the_reader_names_a_missing_file_and_bad_text(tmp_path: Path) -> None:
    with pytest.raises(UntrustedInputError, match="cannot read config file .*No such file"):
        read_regular_file(tmp_path / "none.yaml", "config file")
    (tmp_path / "latin1.yaml").write_bytes(b"lr: caf\xe9\n")
    with pytest.raises(UntrustedInputError, match="is not UTF-8 text"):
        read_text_file(tmp_path / "latin1.yaml", "config file")


def test_config_files_that_are_special_are_problems(special: dict[str, str]) -> None:
    argv = ["resolve", "--assume-device-capability", "none"]
    for path in special:
        argv += ["--config", path]
    code, err = _cli(*argv, "--", *MINIMAL)
    assert code == 2 and "Traceback" not in err
    for path, kind in special.items():
        assert f"config file {path} is a {kind}" in err or f"config file {path} is a" in err
    assert err.count("megaplug reads regular files only") == len(special)


def test_defaults_files_that_are_special_are_problems(special: dict[str, str]) -> None:
    for path, kind in special.items():
        code, err = _cli("resolve", "--defaults", f"@{path}", "--assume-device-capability",
                         "none", "--", *MINIMAL)
        assert code == 2 and "Traceback" not in err
        assert f"--defaults file {path} is a" in err and kind in err, err


def test_a_heterogeneous_config_that_is_special_is_a_problem(special: dict[str, str]) -> None:
    kernel, rest = megaplug.load([])
    for path, kind in special.items():
        with pytest.raises(megaplug.ConfigError) as info:
            kernel.resolve([*rest, *MINIMAL, "--heterogeneous-layers-config-path", path],
                           environ={}, target=NO_GPU)
        found = [p for p in info.value.problems if "--heterogeneous-layers-config-path" in
                 p.message]
        assert found and kind in found[0].message and found[0].plugin == "model", info.value


def test_the_facade_helper_refuses_a_special_heterogeneous_config(special: dict[str, str],
                                                                  ) -> None:
    from megaplug.megatron import validate_model_config_args_from_heterogeneous_config

    for path in special:
        args = argparse.Namespace(heterogeneous_layers_config_path=path,
                                  heterogeneous_layers_config_encoded_json=None)
        with pytest.raises(ValueError, match="regular files only"):
            validate_model_config_args_from_heterogeneous_config(args)


# -- checkpoints -------------------------------------------------------------------------

RESUME = [*MINIMAL, "--use-checkpoint-args"]


def _tracker(root: Path) -> Path:
    root.mkdir(exist_ok=True)
    return root / _checkpoint.TRACKER_FILENAME


def _resume(root: Path, *extra: str) -> tuple[list[megaplug.Problem], list[megaplug.Problem]]:
    """(problems, warnings) of a resume from ``root`` (problems empty when it resolved)."""
    argv = [*RESUME, "--load", str(root), *extra]
    try:
        args = megaplug.megatron.parse_and_validate_args(argv=argv, environ={}, target=NO_GPU,
                                                         torch_types=False, register=False)
    except megaplug.ConfigError as exc:
        return list(exc.problems), list(exc.warnings)
    return [], megaplug.megatron.resolution_warnings(args)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dev_zero"])
def test_a_special_tracker_is_a_warning_never_a_hang(tmp_path: Path, kind: str) -> None:
    root = tmp_path / "ckpt"
    tracker = _tracker(root)
    if kind == "fifo":
        os.mkfifo(tracker)
    elif kind == "directory":
        tracker.mkdir()
    else:
        tracker.symlink_to("/dev/zero")
    problems, warnings = _resume(root)
    assert not problems
    assert any("regular files only" in w.message and str(tracker) in w.message
               for w in warnings), warnings
    problems, _ = _resume(root, "--exit-on-missing-checkpoint")
    assert any("regular files only" in p.message and p.hint for p in problems), problems


TRACKERS = {
    "superscript two": ("²\n".encode(), "not an iteration number"),
    "arabic-indic digit": ("٣".encode(), "not an iteration number"),
    "5,000 digits": (b"9" * 5000, "at most 4096 bytes"),
    "300 digits": (b"9" * 300, "a 300-digit number"),
    "not utf-8": (b"\xff\xfe\x00\x01", "not ASCII text"),
    "latin-1 text": ("café".encode("latin-1"), "not ASCII text"),
    "larger than a tracker": (b"1" * 5000 + b"\n" * 5000, "at most 4096 bytes"),
    "a pattern": (b"1*", "not an iteration number"),
}


@pytest.mark.parametrize("name", sorted(TRACKERS))
def test_a_hostile_tracker_is_a_clear_message(tmp_path: Path, name: str) -> None:
    content, expected = TRACKERS[name]
    root = tmp_path / "ckpt"
    _tracker(root).write_bytes(content)
    with pytest.raises(_checkpoint.CheckpointArgsError, match=expected):
        _checkpoint.checkpoint_file(root)
    problems, warnings = _resume(root)
    assert not problems and any(expected in w.message for w in warnings), warnings
    assert all(len(w.message) < 500 for w in warnings)  # 5,000 digits are not echoed
    code, err = _cli("resolve", "--assume-device-capability", "none", "--", *RESUME,
                     "--load", str(root), "--exit-on-missing-checkpoint")
    assert code == 2 and "Traceback" not in err and expected in err, err


def _checkpoint_path(root: Path) -> Path:
    path = root / "iter_0000010" / "mp_rank_00" / "model_optim_rng.pt"
    path.parent.mkdir(parents=True)
    _tracker(root).write_text("10\n")
    return path


@pytest.mark.parametrize("content", [b"", b"not a checkpoint at all", b"\x00" * 64,
                                     b"PK\x03\x04" + b"\x00" * 60])
def test_an_empty_or_foreign_checkpoint_is_called_corrupt(tmp_path: Path, content: bytes,
                                                           ) -> None:
    _checkpoint_path(tmp_path / "ckpt").write_bytes(content)
    problems, _ = _resume(tmp_path / "ckpt")
    found = [p for p in problems if p.plugin == "checkpointing"]
    assert found, problems
    assert "allow-list" not in found[0].message
    assert any(word in found[0].message for word in ("empty", "corrupt", "not a checkpoint"))
    assert "--use-checkpoint-args" in found[0].flags


def test_a_damaged_pickle_is_called_corrupt_not_refused(tmp_path: Path) -> None:
    _checkpoint_path(tmp_path / "ckpt").write_bytes(b"\x80\x02garbage")
    with pytest.raises(_checkpoint.CheckpointArgsError, match="corrupt") as info:
        _checkpoint.load_saved_state(_checkpoint.checkpoint_file(tmp_path / "ckpt"), [])
    assert "allow-list" not in str(info.value)


def test_a_special_checkpoint_file_is_never_opened_for_reading(tmp_path: Path) -> None:
    path = _checkpoint_path(tmp_path / "ckpt")
    os.mkfifo(path)
    with pytest.raises(_checkpoint.CheckpointArgsError, match="FIFO"):
        _checkpoint.load_saved_state(path, [])


def test_the_skipped_checkpoint_warning_survives_other_problems(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    _tracker(root).write_text("not-a-number\n")
    broken = [*RESUME, "--load", str(root), "--fp16", "--bf16"]
    problems, warnings = _resume(root, "--fp16", "--bf16")
    assert problems and any("not-a-number" in w.message for w in warnings), (problems, warnings)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(megaplug.ConfigError):
        megaplug.megatron.parse_and_validate_args(argv=broken, environ={}, target=NO_GPU,
                                                  torch_types=False, register=False)
    assert "WARNING:" in err.getvalue() and "not-a-number" in err.getvalue()
    code, err_text = _cli("resolve", "--assume-device-capability", "none", "--", *broken)
    assert code == 2 and "not-a-number" in err_text and "--bf16" in err_text
