"""The command's standard streams while it runs: a failed write is never a traceback, and
never lost without a trace.

``stdout`` is the command's answer: when writing it fails (a full disk, ``/dev/full``,
a closed descriptor) the command stops, says so on stderr and exits
:data:`~megaplug.cli._parser.EXIT_OUTPUT_FAILED` -- even where the failure was swallowed on
the way (argparse's ``--help`` ignores a failed write). ``stderr`` is where problems go:
when it cannot be written, the messages are lost but the exit code still says what
happened. A character the stream's encoding cannot carry (a non-UTF-8 file name,
``PYTHONIOENCODING=ascii``) is written as a backslash escape.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class OutputFailed(Exception):
    """Writing the command's output (stdout) failed; ``str()`` says why."""


class _GuardedStream:
    """A standard stream that remembers its first failed write (``failure``); on stdout
    (``fatal``) a failed write also raises :class:`OutputFailed`."""

    def __init__(self, stream: Any, name: str, fatal: bool) -> None:
        self.stream, self.name, self.fatal = stream, name, fatal
        self.failure: str | None = None

    def write(self, text: str) -> int:
        return self._do("write", text)

    def flush(self) -> None:
        self._do("flush")

    def _do(self, operation: str, *text: str) -> Any:
        if self.failure is not None:
            return self._failed(self.failure)
        if self.stream is None:
            return self._failed(f"{self.name} is closed")
        try:
            return getattr(self.stream, operation)(*text)
        except BrokenPipeError:
            raise  # the reader went away: the command line's quiet exit
        except UnicodeEncodeError as error:
            escaped = text[0].encode(error.encoding, "backslashreplace").decode(error.encoding)
            return self._do(operation, escaped)
        except (OSError, ValueError, AttributeError) as error:
            return self._failed(str(error) or type(error).__name__)

    def _failed(self, why: str) -> int:
        self.failure = why
        if self.fatal:
            raise OutputFailed(why)
        return 0

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer ...
        return getattr(self.stream, name)


class guarded_streams:  # noqa: N801 -- used as a function: ``with guarded_streams() as out:``
    """Within the block, ``sys.stdout`` and ``sys.stderr`` are guarded (see the module);
    ``failure`` then says why the output was not written, or is ``None``."""

    def __enter__(self) -> guarded_streams:
        self.saved = sys.stdout, sys.stderr
        self.stdout = _GuardedStream(sys.stdout, "stdout", fatal=True)
        self.stderr = _GuardedStream(sys.stderr, "stderr", fatal=False)
        sys.stdout, sys.stderr = self.stdout, self.stderr  # type: ignore[assignment]
        return self

    @property
    def failure(self) -> str | None:
        """Why the output was lost (a write, or the flush that ends the block, failed)."""
        if self.stdout.failure is None:
            try:
                self.stdout.flush()
            except OutputFailed:
                pass
        return self.stdout.failure

    def __exit__(self, *exc_info: object) -> None:
        sys.stdout, sys.stderr = self.saved


class plugin_output_to_stderr:  # noqa: N801 -- used as a function, in a ``with``
    """Within the block -- plugins imported, declared, resolved -- what is printed to stdout
    is kept aside, then written to stderr: a command's answer on stdout (``resolve``'s JSON)
    holds only the answer. Where the block ends in ``SystemExit`` (argparse's ``--help``
    for the training flags), what it printed is that answer, and goes to stdout."""

    def __enter__(self) -> None:
        import io

        self.saved, self.kept = sys.stdout, io.StringIO()
        sys.stdout = self.kept

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        sys.stdout = self.saved
        text = self.kept.getvalue()
        if text:
            (sys.stdout if kind is SystemExit else sys.stderr).write(text)


def discard_stdout() -> None:
    """Point the process's stdout at the null device, so that what is still buffered for a
    reader that went away or a disk that is full does not fail again at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def report_output_failure(why: str) -> None:
    """Say on stderr (if it can be written) that the output was not written."""
    try:
        sys.stderr.write(f"megaplug: writing the output failed: {why}\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
