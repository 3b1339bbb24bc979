"""``python -m megaplug.megatron SCRIPT.py ARGS...``: see :mod:`megaplug.megatron._switch`."""

import sys

from ._switch import run

run(sys.argv[1:])
