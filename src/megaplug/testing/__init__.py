"""Helpers for testing a plugin: a valid core command line, stand-in plugins, and a check
that the plugin stays a cheap declaration.

With pytest, the fixtures of :mod:`megaplug.testing.fixtures` (installed as the ``megaplug``
pytest plugin) wrap these: ``resolve``, ``problems`` and ``warnings`` resolve the minimal
core configuration plus a test's own flags. Without pytest::

    from megaplug.testing import problems, resolve

    def test_rank_below_hidden_size():
        found = problems("--hidden-size", "64", "--lora-rank", "64")
        assert [p.message for p in found if p.plugin == "lora"] == [
            "--lora-rank 64 must be below --hidden-size 64"]

Flags given later win, so a test overrides any core value by passing it. The environment
is empty unless given, so results do not depend on the shell that runs the tests. A plugin
not installed as a distribution can be passed as ``plugins=[module]``.
"""

from __future__ import annotations

import types
from typing import Any, Callable, Iterable, Mapping, Sequence

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
    from .._api import resolve as resolve_argv

    return resolve_argv(minimal_argv(*extra), environ=dict(environ or {}), plugins=plugins,
                        **kwargs)


def problems(*extra: str, **kwargs: Any) -> list[Any]:
    """Every problem :func:`resolve` with the same arguments finds (none: ``[]``)."""
    from .._errors import ConfigError

    try:
        resolve(*extra, **kwargs)
    except ConfigError as error:
        return list(error.problems)
    return []


def stand_in(name: str, *flags: Any, options: Any = None, rules: Any = None,
             derive: Iterable[Callable[[Any], Any]] = (), after: Iterable[str] = (),
             ) -> types.ModuleType:
    """A plugin named ``name`` (say ``"model"``) that declares just the settings another
    plugin's tests need, so that plugin is tested alone: each flag as ``("--hidden-size",
    {"type": int, "default": 64})``, or ``options=`` a class or declaring function; its
    ``derive`` rules (e.g. ``ffn_hidden_size`` from ``hidden_size``) run like a real
    plugin's. Pass it with the plugin under test as the ``megaplug_plugins`` fixture's set,
    or to :func:`megaplug.load`'s ``builtins``."""
    from .._plugins import PluginInfo
    from .._rules import Rules

    def declare(declarations: Any) -> None:
        if options is not None:
            declarations.declare(options)
        for strings, settings in flags:
            declarations.add_argument(*((strings,) if isinstance(strings, str) else strings),
                                      **settings)

    module = types.ModuleType(f"megaplug_stand_in_{name}")
    # declares only what a test needs: another plugin's supersede of its rules is not checked
    module.megaplug_stand_in = True  # type: ignore[attr-defined]
    all_rules = rules if rules is not None else Rules()
    all_rules.derive(*derive)
    module.megaplug_plugin = PluginInfo(  # type: ignore[attr-defined]
        name=name, description=f"stand-in for the {name} plugin", options=declare,
        rules=all_rules, after=after)
    return module


def modules_imported_by(package: str) -> list[str]:
    """The modules of ``package`` that importing it loads, in a fresh interpreter: just
    ``[package]`` for a plugin whose ``__init__`` names its rules and options by reference,
    which ``megaplug list``, ``flags`` and ``docs`` then import at no cost."""
    return [name for name in _imported_by(package) if name.partition(".")[0] == package]


def _imported_by(package: str) -> list[str]:
    """Every module importing ``package`` loads beyond what megaplug's plugin API (its
    ``PluginInfo``, ``Rules``, ``Draft``, markers and ``hookimpl``) loads itself."""
    import json
    import subprocess
    import sys

    code = ("import importlib, json, sys\n"
            "from megaplug import (Computed, Draft, Flag, FromEnv, PluginInfo, Problem,"
            " Requirement, Rules, hookimpl, options)\n"
            "before = set(sys.modules)\n"
            "importlib.import_module(sys.argv[1])\n"
            "print(json.dumps(sorted(set(sys.modules) - before)))\n")
    done = subprocess.run([sys.executable, "-c", code, package], capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def named_rules(plugin: Any) -> dict[str, list[str]]:
    """Each group of rules a plugin names by reference (``"module:TABLE"``), imported now,
    with the names of its rules: a misspelt reference fails here, not in a resolve."""
    rules = plugin.megaplug_plugin.rules
    return {step.group: [rule.name for rule in step.rules()]
            for steps in rules.steps.values() for step in steps if step.group is not None}


def check_plugin(package: str) -> list[str]:
    """What is wrong with an installed plugin as a declaration (``[]``: nothing): it cannot
    be imported; importing its package loads more than its ``__init__`` (keep ``__init__``
    free of imports: name the options and rules by reference); it is refused beside the
    built-ins and every installed plugin (a name, a flag or an order another plugin has:
    the plugin checked is the newcomer); or a name in its ``PluginInfo`` -- options, a
    group of rules, a superseded rule, an ordering -- names nothing, as a resolve finds."""
    import importlib

    from .._plugins import PluginInfo
    from .._startup import find_spec

    try:
        found_spec = find_spec(package)
    except (ImportError, ValueError) as error:
        found_spec, missing = None, f"{type(error).__name__}: {error}"
    else:
        missing = "no module of that name is on sys.path"
    if found_spec is None:
        return [f"{package} cannot be imported: {missing} (is the plugin installed, "
                "pip install -e DIR?)"]
    imported, failure = _imported_or_failure(package)
    if failure is not None:
        return [f"importing {package} fails: {failure}"]
    found = [f"importing {package} imports {name}: keep {package}/__init__.py free of "
             "imports, naming the options and rules by reference ('module:NAME')"
             for name in imported if name != package]
    module = importlib.import_module(package)
    info = getattr(module, "megaplug_plugin", None)
    if not isinstance(info, PluginInfo):
        return [*found, f"{package} has no megaplug_plugin = PluginInfo(...)"]
    return [*found, *_refusals(module, info.name)]


def _refusals(module: Any, name: str) -> list[str]:
    """Why the plugin set of the built-ins, every installed plugin and ``module`` refuses
    ``module`` (broken: a name, flag or order another has) or a name it gives."""
    from .._errors import PluginError
    from .._kernel import Kernel
    from .._plugins import BROKEN, PluginSet
    from ..sources._selection import PluginSelection

    try:  # tolerant: an impossible order marks the plugins on it broken, as `list` does
        kernel = Kernel(PluginSet(PluginSelection.from_environment({}), extra=[module],
                                  tolerant=True))
    except PluginError as error:
        return [str(error)]
    kernel.check_references()
    records = [record for record in kernel.plugins.records.values() if record.module is module]
    names = {record.name for record in records} or {name}
    found = [f"plugin {record.name!r} is broken: {record.reason}" for record in records
             if record.status == BROKEN]
    return [*found, *(str(problem) for problem in kernel.setup_problems
                      if problem.plugin in names and not (
                          problem.message.startswith(f"plugin {problem.plugin!r} (")
                          and " is broken: " in problem.message))]


def _imported_or_failure(package: str) -> tuple[list[str], str | None]:
    """(:func:`_imported_by`, None), or ([], the last line of the error) where importing
    ``package`` in a fresh interpreter fails."""
    import subprocess

    try:
        return _imported_by(package), None
    except subprocess.CalledProcessError as error:
        lines = [line for line in (error.stderr or "").splitlines() if line.strip()]
        return [], lines[-1] if lines else f"exit status {error.returncode}"
