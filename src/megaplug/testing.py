"""Helpers for testing a plugin: a valid core command line, and resolving with your flags.

A plugin's test should not have to find out which core flags Megatron requires before
its own check can run::

    from megaplug.testing import problems, resolve

    def test_rank_below_hidden_size():
        found = problems("--hidden-size", "64", "--lora-rank", "64")
        assert [p.message for p in found if p.plugin == "lora"] == [
            "--lora-rank 64 is not smaller than --hidden-size 64"]

Flags given later win, so a test overrides any core value by passing it. The environment
is empty unless given, so results do not depend on the shell that runs the tests. A plugin
not installed as a distribution can be passed as ``plugins=[module]``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

#: The smallest valid core configuration: what Megatron requires, nothing else.
MINIMAL_ARGV: tuple[str, ...] = (
    "--num-layers", "2",
    "--hidden-size", "64",
    "--num-attention-heads", "4",
    "--seq-length", "128",
    "--max-position-embeddings", "128",
    "--micro-batch-size", "1",
)


def minimal_argv(*extra: str) -> list[str]:
    """:data:`MINIMAL_ARGV` followed by ``extra`` (whose values win over the core ones)."""
    return [*MINIMAL_ARGV, *extra]


def resolve(*extra: str, environ: Mapping[str, str] | None = None,
            plugins: Sequence[object] = (), **kwargs: Any) -> Any:
    """Resolve the minimal core configuration plus ``extra``; raises ``ConfigError``.

    ``kwargs`` go to :func:`megaplug.resolve` (``config_files``, ``defaults``, ``target``).
    """
    from ._api import resolve as resolve_argv

    return resolve_argv(minimal_argv(*extra), environ=dict(environ or {}), plugins=plugins,
                        **kwargs)


def problems(*extra: str, **kwargs: Any) -> list[Any]:
    """Every problem :func:`resolve` with the same arguments finds (none: ``[]``)."""
    from ._errors import ConfigError

    try:
        resolve(*extra, **kwargs)
    except ConfigError as error:
        return list(error.problems)
    return []


def modules_imported_by(package: str) -> list[str]:
    """The modules of ``package`` that importing it loads, in a fresh interpreter: just
    ``[package]`` for a plugin whose ``__init__`` names its rules and options by reference,
    which ``megaplug list``, ``flags`` and ``docs`` then import at no cost."""
    import json
    import subprocess
    import sys

    code = ("import importlib, json, sys; name = sys.argv[1]; importlib.import_module(name); "
            "print(json.dumps(sorted(m for m in sys.modules if m.partition('.')[0] == name)))")
    done = subprocess.run([sys.executable, "-c", code, package], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def named_rules(plugin: Any) -> dict[str, list[str]]:
    """Each group of rules a plugin names by reference (``"module:TABLE"``), imported now,
    with the names of its rules: a misspelt reference fails here, not in a resolve."""
    rules = plugin.megaplug_plugin.rules
    return {step.group: [rule.name for rule in step.rules()]
            for steps in rules.steps.values() for step in steps if step.group is not None}
