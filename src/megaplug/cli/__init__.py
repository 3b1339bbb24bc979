"""megaplug's command line (``megaplug`` / ``python -m megaplug``).

The commands live here, apart from the kernel: they load it, ask it, and print. The
``megaplug`` console script is :func:`run`: :func:`main`, then the process ends.
"""

from ._main import main, run

__all__ = ["main", "run"]
