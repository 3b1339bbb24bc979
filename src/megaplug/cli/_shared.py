"""What the commands share: loading the kernel for a command's plugin selection, the
target environment and defaults its options describe, resolving as far as the pipeline
gets, and printing problems."""

from __future__ import annotations

import argparse
import os
import sys

from .._errors import ConfigError, Problem
from ._parser import UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Sequence


def suggest(word: str, candidates: Sequence[str], cutoff: float = 0.6) -> str | None:
    """The candidate closest to ``word``, if any is close enough."""
    import difflib

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=cutoff)
    return matches[0] if matches else None


def print_problems(problems: Sequence[Problem]) -> None:
    """Every problem on stderr, under a count (a bounded report: see ``report_lines``)."""
    from .._errors import report_lines

    print("megaplug: " + "\n".join(report_lines(problems)), file=sys.stderr)


def plugin_controls(options: argparse.Namespace) -> list[str]:
    """The command's ``-p`` / ``--no-autoload`` options, as argv tokens for the kernel."""
    controls: list[str] = []
    for name in getattr(options, "plugin_controls", []):
        controls += ["-p", name]
    if getattr(options, "no_autoload", False):
        controls.append("--no-autoload")
    return controls


def load_kernel(options: argparse.Namespace, extra: Sequence[str] = (),
                tolerant: bool = False) -> tuple[Any, list[str]]:
    """The kernel for the command's plugin selection (and ``-p`` among ``extra``)."""
    from .._api import load
    from ._output import plugin_output_to_stderr  # what plugins print as they load

    controls = plugin_controls(options)
    target = target_from(options) if hasattr(options, "assume") else None
    if tolerant:
        # an impossible plugin ordering marks those plugins broken, so the rest can be listed
        from .._kernel import Kernel
        from .._plugins import PluginSet
        from ..environment import TargetEnvironment
        from ..sources._selection import PluginSelection
        selection = PluginSelection.from_environment()
        rest = selection.take_from_argv([*controls, *extra])
        lines = (target or TargetEnvironment()).release_lines()
        with plugin_output_to_stderr():
            return Kernel(PluginSet(selection, tolerant=True), lines=lines), rest
    with plugin_output_to_stderr():
        return load([*controls, *extra], target=target)


def check_plugin_name(plugins: Any, name: str | None, command: str) -> None:
    """A ``--plugin NAME`` that names no plugin is a usage error with a suggestion.

    ``plugins`` is a kernel, or a view's ``{name: [status, reason]}``."""
    if name is None:
        return
    if not isinstance(plugins, dict):
        plugins = {n: [str(r.status), r.reason] for n, r in plugins.plugins.records.items()}
    if name not in plugins:
        names = sorted(plugins)
        suggestion = suggest(name, names)
        hint = f"did you mean {suggestion}?" if suggestion else "the plugins are " + \
            ", ".join(names)
        raise UsageError(f"megaplug {command}: no plugin named {name!r} ({hint})")
    status, reason = plugins[name]
    if status in ("blocked", "broken"):
        raise UsageError(f"megaplug {command}: plugin {name!r} is {status}: "
                         f"{reason}; its flags are not loaded")


def target_from(options: argparse.Namespace) -> Any:
    """The target environment ``--assume`` / ``--assume-device-capability`` describe; every
    malformed one is named in one usage error."""
    from ..environment import TargetEnvironment, parse_assumed_capability, parse_assumed_package

    packages: dict[str, str | None] = {}
    mistakes: list[str] = []
    for item in options.assume:
        try:
            name, version = parse_assumed_package(item)
        except ValueError as exc:
            mistakes.append(str(exc))
            continue
        packages[name] = version
    target = TargetEnvironment(packages=packages, environ=os.environ)
    if getattr(options, "assume_device_capability", None) is not None:
        try:
            target.device_capability = parse_assumed_capability(options.assume_device_capability)
        except ValueError as exc:
            mistakes.append(str(exc))
    if getattr(options, "assume_device_memory", None) is not None:
        from ..environment import parse_assumed_memory

        try:
            target.device_memory = parse_assumed_memory(options.assume_device_memory)
        except ValueError as exc:
            mistakes.append(str(exc))
    if mistakes:
        raise UsageError("\n".join(f"megaplug: {mistake}" for mistake in mistakes))
    return target


def defaults_from(options: argparse.Namespace) -> dict[str, Any]:
    """``--defaults`` as a mapping (a JSON object, or ``@file`` holding one), read with the
    guards of config files: a regular file of sane size, UTF-8, no repeated key, no
    integer too long to handle, no nesting too deep."""
    text = options.defaults
    if not text:
        return {}
    from ..sources._files import UntrustedInputError, parse_json, read_text_file

    where = "--defaults"
    try:
        if text.startswith("@"):
            where = f"--defaults file {text[1:]}"
            text = read_text_file(text[1:], "--defaults file")
        value = parse_json(text, where)
    except UntrustedInputError as exc:
        raise UsageError(f"megaplug: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"megaplug: {where} must hold a JSON object, not "
                         f"{type(value).__name__}")
    # the namespace's own attributes (__class__, __dict__) are no settings to set
    special = [key for key in value if key.startswith("__") and key.endswith("__")]
    if special:
        raise UsageError(f"megaplug: {where} names no setting with "
                         + ", ".join(map(repr, special)) + " (a setting's name, such as "
                         "num_layers, is expected)")
    return value


def config_tokens(options: argparse.Namespace) -> list[str]:
    """The command's ``--config`` files as argv tokens."""
    tokens: list[str] = []
    for path in getattr(options, "config", ()):
        tokens += ["--config", path]
    return tokens


class _Explained:
    """A resolved namespace read like a draft: values by key, ``source(dest)``."""

    def __init__(self, values: dict[str, Any], provenance: dict[str, Any]) -> None:
        self._values, self._provenance = values, provenance

    def __getitem__(self, dest: str) -> Any:
        return self._values[dest]

    def __contains__(self, dest: object) -> bool:
        return dest in self._values

    def __iter__(self) -> Any:
        return iter(self._values)

    def source(self, dest: str) -> Any:
        return self._provenance[dest]


def preflight_wanted() -> bool:
    """The CLI runs the pre-flight checks unless ``MEGAPLUG_PREFLIGHT`` turns them off."""
    from ..sources._switches import SwitchError, switch

    try:
        return switch("MEGAPLUG_PREFLIGHT", True)
    except SwitchError as error:
        raise UsageError(f"megaplug: {error}") from None


def check_switches() -> None:
    """Every yes/no environment variable holding neither, in one usage error (before any
    command reads one of them its own way)."""
    from ..sources._switches import SWITCH_HINT, switch_problems

    problems = switch_problems()
    if problems:
        raise UsageError("\n".join(f"megaplug: {problem} ({SWITCH_HINT})"
                                   for problem in problems))


def resolve_partially(options: argparse.Namespace, args: Sequence[str],
                      ) -> tuple[Any, ConfigError | None]:
    """Resolve as far as the pipeline gets: (the config, the error if any).

    The same pipeline as ``resolve`` -- the Megatron facade's, checkpoint arguments
    (``--use-checkpoint-args``) included. On an invalid configuration the config is the
    draft as the plugins left it, with provenance, which is what ``explain`` and ``diff``
    show.
    """
    from ..megatron import ConfigError as FacadeError
    from ..megatron import parse_and_validate_args
    from ..megatron import provenance as provenance_of
    from ._output import plugin_output_to_stderr

    try:
        with plugin_output_to_stderr():
            namespace = parse_and_validate_args(
                argv=[*plugin_controls(options), *config_tokens(options), *args],
                environ=os.environ, args_defaults=defaults_from(options),
                target=target_from(options), torch_types=False, register=False,
                preflight=preflight_wanted())
    except FacadeError as exc:
        return exc.partial, exc
    provenance = provenance_of(namespace)
    values = {key: value for key, value in vars(namespace).items() if key in provenance}
    return _Explained(values, provenance), None


def involves(kernel: Any, problem: Problem, dest: str) -> bool:
    """Whether ``problem`` names the setting ``dest`` (by any of its spellings)."""
    for flag in problem.flags:
        spec = kernel.table.lookup(flag) or kernel.table.by_env.get(flag)
        if spec is not None and spec.dest == dest:
            return True
    spellings = [s for spec in kernel.table.by_dest.get(dest, ()) for s in spec.option_strings]
    words = set(problem.message.replace(",", " ").replace("(", " ").replace(")", " ").split())
    return dest in words or any(spelling in words for spelling in spellings)
