"""megaplug's command line (``megaplug`` / ``python -m megaplug``).

The commands live here, apart from the kernel: they load it, ask it, and print. The
``megaplug`` console script is :func:`main`.
"""

from ._main import main

__all__ = ["main"]
