"""megaplug's command line (``megaplug`` / ``python -m megaplug``).

The commands live here, apart from the kernel: they load it, ask it, and print. The
``megaplug`` console script is :func:`run`: :func:`main`, then the process ends.
"""

try:
    from ._main import main, run
except KeyboardInterrupt:  # Ctrl-C while the program starts: its quiet exit, 128 + SIGINT
    raise SystemExit(130) from None

__all__ = ["main", "run"]
