"""The cyclic garbage collector while a command runs: off, and back for in-process callers."""

from __future__ import annotations

import contextlib
import gc
import io
import subprocess
import sys
import textwrap

import pytest

from megaplug.cli import main


@pytest.fixture
def collector_restored():
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()


def test_no_collection_while_a_command_runs(toy_env, collector_restored):
    collections = []

    def note(phase, info):
        collections.append(phase)

    gc.enable()
    gc.callbacks.append(note)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["list", "--no-autoload", "-p", "toy_plugins"]) == 0
    finally:
        gc.callbacks.remove(note)
    assert collections == []


def test_an_in_process_caller_gets_the_collector_back(toy_env, collector_restored):
    gc.enable()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["list"]) == 0
    assert gc.isenabled()
    gc.disable()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["list"]) == 0
    assert not gc.isenabled()  # left as the caller had it


def test_a_failing_command_gives_the_collector_back_too(toy_env, collector_restored):
    gc.enable()
    with contextlib.redirect_stderr(io.StringIO()):
        assert main(["lsit"]) == 2
    assert gc.isenabled()


def test_the_process_command_leaves_it_off_until_exit(toy_env):
    code = textwrap.dedent("""
        import contextlib, gc, io, sys
        from megaplug.cli import main
        sys.argv = ["megaplug", "list"]
        with contextlib.redirect_stdout(io.StringIO()):
            code = main()
        print(code, gc.isenabled())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["0", "False"]
