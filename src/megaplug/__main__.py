"""``python -m megaplug`` runs the command-line interface."""

from .cli import run

run()
