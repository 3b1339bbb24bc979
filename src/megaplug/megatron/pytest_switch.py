"""A pytest plugin that runs a Megatron-LM test suite on megaplug's arguments.

``python -m pytest -p megaplug.megatron.pytest_switch tests/unit_tests/...`` (with the
Megatron-LM checkout importable) calls :func:`megaplug.megatron.install` once pytest is
configured -- after the initial conftest files, before any test module is collected -- so
every ``from megatron.training.arguments import parse_args`` in the tests and in Megatron
gets megaplug's function. Nothing in the Megatron-LM tree is changed.
"""

from __future__ import annotations


from ._switch import install

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def pytest_configure(config: Any) -> None:
    """Switch megaplug in before test collection imports Megatron's argument functions."""
    install()


def pytest_report_header(config: Any) -> str:
    """Say which Megatron the switch replaced, so a log shows what was tested."""
    import sys

    arguments = sys.modules.get("megatron.training.arguments")
    where = getattr(arguments, "__file__", "not imported")
    return f"megaplug switch: megatron.training.arguments from {where}"
