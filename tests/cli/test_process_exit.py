"""The ``megaplug`` program ends without tearing the interpreter down, and loses nothing by it:
its whole output, its exit code, ``atexit`` callbacks, other threads, failing writes."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import textwrap

import pytest

from megaplug.cli import main

from .cli_support import megaplug_process, subprocess_env


def _buffered_env(**extra: str) -> dict[str, str]:
    """The environment of a process whose stdout is buffered as usual (not the sandbox's
    ``PYTHONUNBUFFERED``), so that what is still in a buffer at the end would be lost."""
    env = subprocess_env(**extra)
    env.pop("PYTHONUNBUFFERED", None)
    return env


def _program(prelude: str, *argv: str, **env: str) -> subprocess.CompletedProcess:
    """A process that runs ``prelude`` and then the megaplug program on ``argv``."""
    code = textwrap.dedent(prelude) + textwrap.dedent(f"""
        import sys
        from megaplug.cli import run
        sys.argv = ["megaplug", *{list(argv)!r}]
        run()
        print("run() returned", file=sys.stderr)
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_buffered_env(**env))


def test_the_whole_output_arrives_through_a_pipe(tmp_path):
    env = _buffered_env(MEGAPLUG_CACHE_DIR=str(tmp_path))
    in_process = io.StringIO()
    with contextlib.redirect_stdout(in_process):
        assert main(["flags", "--json"]) == 0
    result = megaplug_process("flags", "--json", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == in_process.getvalue()  # nothing left in a buffer at exit


def test_the_output_arrives_in_a_file_too(tmp_path):
    target = tmp_path / "flags.txt"
    with target.open("w") as stdout:
        result = subprocess.run([sys.executable, "-m", "megaplug", "flags"], stdout=stdout,
                                stderr=subprocess.PIPE, text=True,
                                env=_buffered_env(MEGAPLUG_CACHE_DIR=str(tmp_path)))
    assert result.returncode == 0, result.stderr
    in_process = io.StringIO()
    with contextlib.redirect_stdout(in_process):
        assert main(["flags"]) == 0
    assert target.read_text() == in_process.getvalue()


@pytest.mark.parametrize(("argv", "code"), [
    (["list"], 0),
    (["resolve", "--", "--num-layers", "-3"], 2),
    (["lsit"], 2),
])
def test_the_exit_code_is_the_commands(tmp_path, argv, code):
    result = _program("", *argv, MEGAPLUG_CACHE_DIR=str(tmp_path))
    assert result.returncode == code, result.stderr
    assert "run() returned" not in result.stderr


def test_a_short_answer_is_not_left_in_the_buffer(tmp_path):
    result = _program("", "list", MEGAPLUG_CACHE_DIR=str(tmp_path))
    assert result.returncode == 0
    assert "moe" in result.stdout and result.stdout.endswith("\n")


def test_atexit_callbacks_run_once(tmp_path):
    result = _program("""
        import atexit, sys
        atexit.register(lambda: print("callback ran", file=sys.stderr))
    """, "list", MEGAPLUG_CACHE_DIR=str(tmp_path))
    assert result.returncode == 0
    assert result.stderr.count("callback ran") == 1


def test_a_running_thread_is_waited_for(tmp_path):
    result = _program("""
        import sys, threading, time
        def late():
            time.sleep(0.3)
            print("thread finished", file=sys.stderr, flush=True)
        threading.Thread(target=late).start()
    """, "list", MEGAPLUG_CACHE_DIR=str(tmp_path))
    assert result.returncode == 0
    assert "thread finished" in result.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_write_that_fails_at_the_end_is_reported(tmp_path):
    # stdout buffered whole until the end, so that the final flush is what fails
    prelude = """
        import io, os, sys
        sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False),
                                                        buffer_size=1 << 20))
    """
    with open("/dev/full", "w") as full:
        code = textwrap.dedent(prelude) + (
            "from megaplug.cli import run\nsys.argv = ['megaplug', 'list']\nrun()\n")
        result = subprocess.run([sys.executable, "-c", code], stdout=full,
                                stderr=subprocess.PIPE, text=True,
                                env=_buffered_env(MEGAPLUG_CACHE_DIR=str(tmp_path)))
    assert result.returncode == 120  # the interpreter's own code for it
    assert "megaplug: writing the output failed: [Errno 28] No space left on device" in (
        result.stderr)
