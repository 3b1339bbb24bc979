"""The ``megaplug`` pytest plugin: fixtures for testing a megaplug plugin.

Installed with megaplug (the ``pytest11`` entry point), so a plugin's tests use them with no
conftest::

    def test_alpha_defaults_to_twice_the_rank(resolve):
        assert resolve("--lora-rank", "8").lora_alpha == 16.0

    def test_rank_below_hidden_size(problems):
        assert problems("--lora-rank", "64") == ["--lora-rank 64 must be below --hidden-size 64"]

By default a test resolves with the built-ins and every installed plugin, on the minimal
valid core command line (:data:`megaplug.testing.MINIMAL_ARGV`) plus its own flags, in an
empty environment. To test a plugin alone, override ``megaplug_plugins`` in a conftest with
the plugin and :func:`megaplug.testing.stand_in` plugins for the settings it reads; to hear
one plugin's problems only, override ``megaplug_reporter``.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import pytest

from . import MINIMAL_ARGV

#: The GPU a test's launch targets unless it says otherwise (``capability=``): a Hopper.
DEFAULT_CAPABILITY = (9, 0)


@pytest.fixture
def megaplug_plugins() -> Sequence[object] | None:
    """The plugin set tests resolve with: ``None`` (the default) for the built-ins and every
    installed plugin; override it with plugin modules and stand-ins to test a plugin alone
    (then the core command line is not added: the stand-ins declare what the test needs)."""
    return None


@pytest.fixture
def megaplug_reporter() -> str | None:
    """The plugin whose problems and warnings ``problems`` and ``warnings`` return (``None``:
    every plugin's)."""
    return None


@pytest.fixture
def megaplug_kernel(megaplug_plugins: Sequence[object] | None) -> Any:
    """The kernel of ``megaplug_plugins`` for this machine's Megatron release line (made
    once per process, plugin set and line); ``resolve`` takes the one of the line its
    target names (``resolve(..., packages={"megatron_core": "0.17.1"})``)."""
    return _kernel_of(megaplug_plugins, None)


def _kernel_of(plugins: Sequence[object] | None, target: Any) -> Any:
    """The kernel of ``plugins`` (``None``: the built-ins and every installed plugin) whose
    flag table is for ``target``'s release lines (``None``: this machine's)."""
    from .._api import load

    if plugins is None:
        return load(environ={}, target=target)[0]
    return load(builtins=list(plugins), environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"},
                target=target)[0]


@pytest.fixture
def resolve(megaplug_kernel: Any, megaplug_plugins: Sequence[object] | None
            ) -> Callable[..., Any]:
    """``resolve(*flags, environ=None, capability=(9, 0), **target)``: the resolved
    configuration of the core command line plus ``flags``, or ``ConfigError``. ``environ``
    is the launch's environment (empty unless given); ``capability`` and ``target`` say the
    GPU and packages (``TargetEnvironment``'s arguments) it targets."""
    from ..environment import TargetEnvironment

    core = MINIMAL_ARGV if megaplug_plugins is None else ()

    def run(*flags: str, environ: dict[str, str] | None = None,
            capability: tuple[int, int] | None = DEFAULT_CAPABILITY, **target: Any) -> Any:
        launch = TargetEnvironment(environ=dict(environ or {}), device_capability=capability,
                                   **target)
        # a table is for one release line: a target naming another gets that line's kernel
        kernel = megaplug_kernel if launch.release_lines() == megaplug_kernel.lines else \
            _kernel_of(megaplug_plugins, launch)
        return kernel.resolve([*core, *flags], environ=dict(environ or {}), target=launch)

    return run


def _reported(resolve: Callable[..., Any], reporter: str | None, kind: str
              ) -> Callable[..., list[str]]:
    from .._errors import ConfigError

    def run(*flags: str, **kwargs: Any) -> list[str]:
        try:
            resolved = resolve(*flags, **kwargs)
            found = resolved.warnings if kind == "warnings" else []
        except ConfigError as error:
            found = error.problems if kind == "problems" else error.warnings
        return [p.message for p in found if reporter is None or p.plugin == reporter]

    return run


@pytest.fixture
def problems(resolve: Callable[..., Any], megaplug_reporter: str | None
             ) -> Callable[..., list[str]]:
    """``problems(*flags, **like resolve)``: the messages of the problems that resolve finds
    (``[]`` when it resolves), of ``megaplug_reporter``'s plugin only if one is set."""
    return _reported(resolve, megaplug_reporter, "problems")


@pytest.fixture
def warnings(resolve: Callable[..., Any], megaplug_reporter: str | None
             ) -> Callable[..., list[str]]:
    """``warnings(*flags, **like resolve)``: the messages of the warnings a resolve gives,
    valid or not."""
    return _reported(resolve, megaplug_reporter, "warnings")
