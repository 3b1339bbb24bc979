"""Issue 31, class 5: writing the output. Every command, whatever happens to its streams --
stdout on a full disk (buffered or not) or closed, stderr on a full disk or closed, Ctrl-C,
a ``docs --out`` that cannot be written, file names a stream's encoding cannot carry --
ends with a documented exit code and a message, never a traceback, and leaves no
temporary file in the cache."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megaplug.cli._parser import EXIT_INTERRUPTED, EXIT_INVALID, EXIT_OUTPUT_FAILED

from .cli_support import VALID, subprocess_env

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache shared by this module's processes, and two config files to diff."""
    root = tmp_path_factory.mktemp("output")
    (root / "a.yaml").write_text("hidden_size: 64\n")
    (root / "b.yaml").write_text("hidden_size: 128\n")
    return root


#: Every command, as a process would run it (each prints something on success).
COMMANDS = {
    "list": ["list"],
    "list-json": ["list", "--json"],
    "flags": ["flags"],
    "flags-json": ["flags", "--json", "num-layers"],
    "version": ["--version"],
    "help": ["--help"],
    "resolve": ["resolve", "--", *VALID],
    "resolve-yaml": ["resolve", "--format", "yaml", "--", *VALID],
    "resolve-help": ["resolve", "--", "--help"],
    "explain": ["explain", "ffn_hidden_size", "--", *VALID],
    "diff": ["diff", "{root}/a.yaml", "{root}/b.yaml", "--", *VALID],
    "schema": ["schema"],
    "completion": ["completion", "bash"],
    "docs": ["docs", "--out", "{root}/reference"],
}

#: How stdout fails: a full disk written at once or at the final flush, or no stdout.
STDOUT_FAILURES = {
    "full-unbuffered": ("/dev/full", {"PYTHONUNBUFFERED": "1"}),
    "full-buffered": ("/dev/full", {}),
    "closed": (None, {"PYTHONUNBUFFERED": "1"}),
}


def _process(argv, root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close=None,
             prelude="", **env):
    """The megaplug program on ``argv`` (``{root}`` filled in), its ``close`` stream ("1"
    or "2") closed."""
    argv = [token.replace("{root}", str(root)) for token in argv]
    environ = subprocess_env(MEGAPLUG_CACHE_DIR=str(root / "cache"), **env)
    if "PYTHONUNBUFFERED" not in env:
        environ.pop("PYTHONUNBUFFERED", None)
    code = textwrap.dedent(prelude) + "import sys\nfrom megaplug.cli import run\n" \
        "sys.argv = ['megaplug', *sys.argv[1:]]\nrun()\n"
    command = [sys.executable, "-c", code, *argv]
    if close is not None:
        command = ["sh", "-c", f'exec "$@" {close}>&-', "sh", *command]
    return subprocess.run(command, stdout=stdout, stderr=stderr, env=environ, cwd=root)


@pytest.mark.parametrize("failure", sorted(STDOUT_FAILURES))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_reports_an_output_it_could_not_write(warm, command, failure):
    target, env = STDOUT_FAILURES[failure]
    if target is None:
        result = _process(COMMANDS[command], warm, stdout=None, close="1", **env)
    else:
        with open(target, "w") as full:
            result = _process(COMMANDS[command], warm, stdout=full, **env)
    stderr = result.stderr.decode()
    assert result.returncode == EXIT_OUTPUT_FAILED, stderr
    assert "Traceback" not in stderr
    why = "stdout is closed" if target is None else "[Errno 28] No space left on device"
    assert stderr.count(f"megaplug: writing the output failed: {why}") == 1, stderr


ERRORS = {
    "invalid configuration": ["resolve", "--", "--num-layers", "-3"],
    "unknown command": ["lsit"],
    "explain of nothing": ["explain", "no_such_setting"],
}


@pytest.mark.parametrize("failure", ["full-unbuffered", "full-buffered", "closed"])
@pytest.mark.parametrize("error", sorted(ERRORS))
def test_an_error_keeps_its_exit_code_when_stderr_cannot_be_written(warm, error, failure):
    env = {} if failure == "full-buffered" else {"PYTHONUNBUFFERED": "1"}
    if failure == "closed":
        result = _process(ERRORS[error], warm, stderr=None, close="2", **env)
    else:
        with open("/dev/full", "w") as full:
            result = _process(ERRORS[error], warm, stderr=full, **env)
    assert result.returncode == EXIT_INVALID
    assert result.stdout.decode() == ""  # the problems never land on stdout instead


INTERRUPTED = """
    import os
    def interrupted(*args, **kwargs):  # Ctrl-C between a cache file's write and rename
        raise KeyboardInterrupt
    os.replace = interrupted
"""


def test_ctrl_c_ends_quietly_and_leaves_no_temporary_file(tmp_path):
    result = _process(["list"], tmp_path, prelude=INTERRUPTED)
    assert result.returncode == EXIT_INTERRUPTED
    assert result.stderr.decode() == ""
    assert sorted((tmp_path / "cache").glob("*.tmp")) == []


def test_ctrl_c_while_the_program_starts_is_quiet(tmp_path):
    prelude = """
        import builtins
        real_import = builtins.__import__
        def interrupted(name, *args, **kwargs):
            if name == "_main":
                raise KeyboardInterrupt
            return real_import(name, *args, **kwargs)
        builtins.__import__ = interrupted
    """
    result = _process(["list"], tmp_path, prelude=prelude)
    assert result.returncode == EXIT_INTERRUPTED
    assert result.stderr.decode() == ""


def test_writing_a_cache_file_removes_temporary_files_left_by_killed_processes(tmp_path):
    from megaplug.cache import _store

    cache = tmp_path / "cache"
    cache.mkdir()
    stale, fresh = cache / "list-x.json.1.ab.tmp", cache / "list-y.json.2.cd.tmp"
    for path in (stale, fresh):
        path.write_text("{")
    old = os.stat(stale).st_mtime - 2 * _store._STALE_TEMPORARY_SECONDS
    os.utime(stale, (old, old))
    assert _store._store(str(cache / "list-z.json"), {"value": 1})
    assert not stale.exists()
    assert fresh.exists()  # another process may be about to rename it


def test_an_interrupted_cache_write_removes_its_temporary_file(tmp_path, monkeypatch):
    from megaplug.cache import _store

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_store.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _store._store(str(tmp_path / "list-z.json"), {"value": 1})
    assert os.listdir(tmp_path) == []


# -- docs --out ----------------------------------------------------------------------------

def _docs(capsys, out):
    from megaplug.cli import main

    code = main(["docs", "--out", out])
    return code, capsys.readouterr()


@pytest.mark.parametrize(("out", "message"), [
    ("", "megaplug docs: --out needs a directory (it was empty)"),
    ("{file}", "megaplug docs: --out '{file}' is a file, not a directory"),
    ("{file}/pages", "megaplug docs: --out '{file}/pages' is under a file, not a directory"),
    ("bad\0name", "megaplug docs: cannot write the reference to 'bad\\x00name'"),
])
def test_docs_refuses_an_out_it_cannot_write_into(tmp_path, monkeypatch, capsys, out, message):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    file = tmp_path / "existing.md"
    file.write_text("kept\n")
    code, captured = _docs(capsys, out.replace("{file}", str(file)))
    assert code == EXIT_INVALID
    assert message.replace("{file}", str(file)) in captured.err
    assert captured.out == ""
    assert file.read_text() == "kept\n"


def test_docs_names_a_read_only_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(self))

    monkeypatch.setattr(Path, "write_text", read_only)
    code, captured = _docs(capsys, str(tmp_path / "pages"))
    assert code == EXIT_INVALID
    assert (f"megaplug docs: cannot write the reference to '{tmp_path / 'pages'}': "
            "Read-only file system") in captured.err


# -- file names a stream cannot carry ----------------------------------------------------

NAMES = {"latin-1 bytes": b"caf\xe9", "non-ASCII": "b\u20ac".encode()}


@pytest.mark.parametrize("encoding", ["ascii", "utf-8"])
@pytest.mark.parametrize("name", sorted(NAMES))
@pytest.mark.parametrize("command", ["diff", "explain", "docs"])
def test_file_names_are_escaped_not_a_traceback(tmp_path, command, name, encoding):
    stem = NAMES[name]
    launch = [token.encode() for token in VALID]
    del launch[launch.index(b"--hidden-size"):launch.index(b"--hidden-size") + 2]
    config = bytes(tmp_path) + b"/" + stem + b".yaml"
    with open(config, "wb") as handle:
        handle.write(b"hidden_size: 64\n")
    argv = {"diff": [b"diff", config, config, b"--", *launch],
            "explain": [b"explain", b"hidden_size", b"--config", config, b"--", *launch],
            "docs": [b"docs", b"--out", bytes(tmp_path) + b"/" + stem]}[command]
    env = subprocess_env(MEGAPLUG_CACHE_DIR=str(tmp_path / "cache"), PYTHONIOENCODING=encoding)
    result = subprocess.run([sys.executable.encode(), b"-m", b"megaplug", *argv],
                            capture_output=True, env=env)
    assert result.returncode == 0, result.stderr
    assert b"Traceback" not in result.stderr
    # the name as Python reads it from argv, written as the stream's encoding can carry it
    shown = stem.decode("utf-8", "surrogateescape").encode(encoding, "backslashreplace")
    assert shown in result.stdout
