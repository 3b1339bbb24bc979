"""Megatron's ``parse_args`` / ``validate_args`` / ``parse_and_validate_args`` on megaplug.

The namespace these return is the one Megatron's own functions return: the same keys, and
values of the same types (megatron.core's enums, torch dtypes, ``signal.Signals``) where
megatron.core is installed. It holds values only -- it pickles into a checkpoint like
Megatron's -- and megaplug's provenance and warnings for it are read with
:func:`provenance` and :func:`resolution_warnings`.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import _errors
from .._api import load
from .._config import Draft, Provenance
from .._errors import Problem, ProblemSink
from .._kernel import Kernel
from ..sources._config_files import take_config_files
from ..environment import TargetEnvironment
from ._native import from_native, to_native
from ._state import NamespaceState, remember, state_of
from ._unparsed import read_namespace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Mapping, Sequence

#: Where a value that the caller set on the namespace between parse and validate came from.
_CALLER_EDIT = "set on the namespace before validate_args"


class ConfigError(_errors.ConfigError, AssertionError):
    """Every problem with the arguments, at once.

    Also an ``AssertionError``: Megatron's own checks are asserts, and code around
    Megatron (its tests, launchers) catches that. ``partial`` is the configuration as far as
    the pipeline got (a :class:`megaplug.Draft`, with provenance), or None when it failed
    before validation.
    """

    def __init__(self, problems: Any, partial: Draft | None = None,
                 warnings: Any = ()) -> None:
        super().__init__(problems, warnings)
        self.partial = partial

    def __reduce__(self) -> tuple[Any, ...]:
        # the draft holds the flag table's parsers (code): a pickled error goes without it
        return type(self), (self.problems, None, self.warnings)


class UsageError(ConfigError, SystemExit):
    """Every problem, when some are with the command line itself (an unknown flag, a value
    that does not parse, a choice that does not exist).

    There Megatron's ``parse_args`` stops as argparse does, raising ``SystemExit``, and code
    around Megatron (its tests, launchers) expects that exit. So this is also a
    ``SystemExit`` -- whose ``code`` is the report, so that uncaught it is printed on stderr
    and the process exits with status 1, as ``sys.exit(message)`` does (the switch,
    ``python -m megaplug.megatron``, exits 2 as argparse does) -- and still a
    :class:`ConfigError` (an ``AssertionError``) carrying every problem, validation's
    included.
    """

    def __init__(self, problems: Any, partial: Draft | None = None,
                 warnings: Any = ()) -> None:
        super().__init__(problems, partial, warnings)
        self.code = str(self)


def _raise(problems: Any, partial: Draft | None, command_line: bool,
           warnings: Any = ()) -> None:
    """Raise every problem: as a :class:`UsageError` when the command line itself had one,
    else as a :class:`ConfigError`."""
    error_type = UsageError if command_line else ConfigError
    raise error_type(problems, partial=partial, warnings=warnings) from None


def parse_args(
    extra_args_provider: Callable[[Any], Any] | None = None,
    ignore_unknown_args: bool = False,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> argparse.Namespace:
    """Parse the command line (``sys.argv`` by default) like Megatron's ``parse_args``.

    ``rank`` and ``world_size`` come from ``RANK`` / ``WORLD_SIZE``. The namespace is not
    yet validated; pass it to :func:`validate_args`. Parse problems raise
    :class:`UsageError` (a ``ConfigError``, and a ``SystemExit`` as argparse's error is).
    """
    args = _parse(extra_args_provider, ignore_unknown_args, argv, environ)
    state = state_of(args)
    if state is not None and state.problems is not None and state.problems.problems:
        _raise(state.problems.problems, None, command_line=True)
    return args


def _parse(extra_args_provider: Callable[[Any], Any] | None, ignore_unknown_args: bool,
           argv: Sequence[str] | None, environ: Mapping[str, str] | None,
           target: TargetEnvironment | None = None,
           ) -> argparse.Namespace:
    from ..sources._config_files import command_line_tokens

    # one rule with megaplug.resolve: a list of str (a path as its text), never one str
    tokens = command_line_tokens(sys.argv[1:] if argv is None else argv, "argv")
    env = os.environ if environ is None else environ
    provider_problems: list[Problem] = []
    provider, tokens = _take_script_flags(extra_args_provider, tokens, provider_problems)
    foreign: list[Problem] = []
    if ignore_unknown_args:
        tokens = _without_foreign_plugin_loads(tokens, foreign)
    kernel, rest = load(tokens, environ=env, target=target)  # the target release's flags
    files, rest = take_config_files(rest)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    if provider is not None and _wants_help(rest):
        provider.parser.print_help()  # Megatron's flags and the script's, as Megatron's
        raise SystemExit(0)
    draft, sink = kernel.parse(rest, config_files=files, environ=env, target=target,
                               ignore_unknown=ignore_unknown_args)
    sink.problems.extend(provider_problems)
    if ignore_unknown_args:
        _ignore_foreign_selections(kernel, sink)
        sink.warnings.extend(foreign)
    parsed, parsed_provenance = draft.to_dict(), draft.provenance()
    if provider is not None:
        provider.merge(parsed, parsed_provenance, kernel.table.owner)
    args = argparse.Namespace(**parsed)
    if _records_given_global_batch(kernel):
        args._is_global_batch_size_explicitly_specified = (
            getattr(args, "global_batch_size", None) is not None)
    extra = provider.settings - set(kernel.table.by_dest) if provider else frozenset()
    remember(args, NamespaceState(kernel, parsed_provenance, dict(vars(args)), sink,
                                  frozenset(extra)))
    return args


#: The first Megatron release whose parse_args records whether --global-batch-size was
#: given (``_is_global_batch_size_explicitly_specified``); older releases' namespaces lack it.
_GIVEN_GLOBAL_BATCH_RELEASE = "0.18.0"


def _records_given_global_batch(kernel: Kernel) -> bool:
    from ..environment._releases import NEWEST, MegatronRelease

    release = MegatronRelease(kernel.lines.get("megatron_core", NEWEST))
    return release.at_least(_GIVEN_GLOBAL_BATCH_RELEASE)


def _take_script_flags(extra_args_provider: Callable[[Any], Any] | None,
                       tokens: list[str], problems: list[Problem]) -> tuple[Any, list[str]]:
    """The provider's flags and the tokens left once they are taken out.

    Flags the entry script declares are the script's (its ``-p/--port``, its ``--config``):
    taken before megaplug reads its plugin selection (``-p``) and config files from the rest.
    """
    if extra_args_provider is None:
        return None, tokens
    from ._provider import ProviderFlags  # with Megatron's groups: only a provider needs them

    provider = ProviderFlags(extra_args_provider)
    lead = tokens[:1] if tokens[:1] == ["--"] else []
    return provider, lead + provider.take(tokens[len(lead):], problems)


def _wants_help(tokens: Sequence[str]) -> bool:
    """``-h`` / ``--help`` among the flags (not after a ``--``)."""
    for token in tokens:
        if token == "--":
            return False
        if token in ("-h", "--help"):
            return True
    return False


def _without_foreign_plugin_loads(tokens: Sequence[str], warnings: list[Problem]) -> list[str]:
    """``tokens`` less each ``-p NAME`` that names no megaplug plugin, with a warning each.

    Megatron's ``parse_args(ignore_unknown_args=True)`` ignores what it does not know in
    ``sys.argv``; there ``-p xdist`` is pytest's, when Megatron's tests parse pytest's
    command line, and is no plugin for megaplug to import -- whether or not ``xdist`` is
    importable. A name is megaplug's when an installed distribution declares it as a
    ``megaplug`` entry point, or it is a built-in's.
    """
    if not any(token.startswith("-p") for token in tokens):
        return list(tokens)
    from .._plugins import BUILTIN_PLUGINS
    from ..cache._entry_points import entry_points

    known = {entry.name for entry in entry_points()}
    known.update(path.rpartition(".")[2] for path in BUILTIN_PLUGINS)
    kept: list[str] = []
    position = 0
    while position < len(tokens):
        token = tokens[position]
        if token == "--":
            return kept + list(tokens[position:])
        name, width = None, 1
        if token == "-p" and position + 1 < len(tokens):
            name, width = tokens[position + 1], 2
        elif token.startswith("-p") and not token.startswith("--") and len(token) > 2:
            name = token[2:].lstrip("=")
        if name is not None and not name.startswith("no:") and name not in known:
            warnings.append(Problem(f"ignored (ignore_unknown_args): -p {name} names no "
                                    "megaplug plugin", hint="another program's option"))
        else:
            kept.extend(tokens[position:position + width])
        position += width
    return kept


def _ignore_foreign_selections(kernel: Kernel, sink: ProblemSink) -> None:
    """Keep a plugin selection that names no megaplug plugin as a warning, not a problem.

    Megatron's ``parse_args(ignore_unknown_args=True)`` ignores what it does not know in
    ``sys.argv``; there a ``-p no:NAME`` may well be another program's option (pytest's
    ``-p no:cacheprovider``, when Megatron's tests parse pytest's command line).
    """
    selection = {message for message, _ in kernel.plugins.selection_problems}
    foreign = [problem for problem in sink.problems if problem.plugin is None
               and problem.message in selection]
    sink.problems[:] = [problem for problem in sink.problems if problem not in foreign]
    sink.warnings.extend(Problem(f"ignored (ignore_unknown_args): {problem.message}",
                                 hint=problem.hint) for problem in foreign)


def validate_args(
    args: argparse.Namespace,
    defaults: Mapping[str, Any] | None = None,
    *,
    target: TargetEnvironment | None = None,
    environ: Mapping[str, str] | None = None,
    torch_types: bool = True,
    preflight: bool | None = None, print_arguments: bool | None = None,
) -> argparse.Namespace:
    """Normalize, derive and validate ``args`` in place, like Megatron's ``validate_args``.

    ``defaults`` fill settings that are still ``None`` (Megatron's ``args_defaults``).
    ``torch_types`` (the default) gives Megatron's value types -- torch dtypes, and
    megatron.core's enums where it is installed; ``False`` keeps megaplug's torch-free
    stand-ins. ``preflight`` runs the pre-flight checks (what Megatron rejects only when it
    builds the model): as ``MEGAPLUG_PREFLIGHT`` says, else off -- on under the switch.
    ``print_arguments`` prints Megatron's argument table (default: with ``torch_types``).
    Raises :class:`ConfigError` with every problem found -- a :class:`UsageError` when the
    command line it was parsed from had one. Returns ``args``.
    """
    env = os.environ if environ is None else environ
    state, values, lacking = read_namespace(args, env, target, _as_megaplug_values)
    kernel = state.kernel
    sink = state.problems if state.problems is not None else ProblemSink()
    provenance = _provenance_for(values, state, kernel, sink)
    command_line_problems, state.problems = bool(sink.problems), None
    if lacking is not None:  # once, not as each rule that reads one failing
        _raise([*sink.problems, lacking], None, command_line_problems, sink.warnings)
    target = _target_with_preflight_switch(target, env, preflight)
    if defaults:
        kernel.apply_caller_defaults(_as_megaplug_values(defaults, kernel), values, provenance,
                                     sink)
    draft = Draft(values, provenance, kernel.table, sink, target)
    try:
        resolved = kernel.finish(draft, sink)
    except _errors.ConfigError as exc:
        _print_warnings(args, exc.warnings)  # a skipped checkpoint matters most on failure
        _raise(exc.problems, draft, command_line_problems, exc.warnings)
    _write_back(args, resolved, state, torch_types)
    return _tabled(args, env, torch_types if print_arguments is None else print_arguments, target)


def _tabled(args: argparse.Namespace, env: Mapping[str, str], wanted: bool,
            target: TargetEnvironment) -> argparse.Namespace:
    """``args``, having printed Megatron's argument table when ``wanted``, on rank 0, where
    Megatron's ``validate_args`` prints it: as it ends (:mod:`._table`), after a line on
    standard error naming the release in force (the ``target``'s)."""
    if wanted:
        from ._table import print_argument_table

        print_argument_table(args, env, release=target.release_source())
    return args


def _as_megaplug_values(values: Mapping[str, Any], kernel: Kernel) -> dict[str, Any]:
    """Megatron's value types (its enum members, torch dtypes) as megaplug's stand-ins."""
    stand_in_for = _StandIns(kernel)
    return {key: from_native(value, stand_in_for) for key, value in values.items()}


def _write_back(args: argparse.Namespace, resolved: Any, state: NamespaceState,
                torch_types: bool) -> None:
    """Make ``args`` hold exactly the resolved values (in Megatron's types if asked),
    remember their provenance and warnings for :func:`provenance` and friends, and print
    the warnings."""
    final = resolved.to_dict()
    for key in list(vars(args)):
        if key not in final:
            delattr(args, key)
    for key, value in final.items():
        setattr(args, key, to_native(value) if torch_types else value)
    state.provenance = dict(resolved.provenance())
    state.warnings = list(resolved.warnings)
    state.parsed = dict(vars(args))
    remember(args, state)
    _print_warnings(args, resolved.warnings)


def _print_warnings(args: argparse.Namespace, warnings: Sequence[Problem]) -> None:
    """Megatron prints its warnings on rank 0 as it validates, whether or not validation
    then fails; so does the facade, on stderr."""
    if getattr(args, "rank", 0) == 0:
        for warning in warnings:
            print(f"WARNING: {warning}", file=sys.stderr)


#: The pre-flight plugin's environment switch (read by sources._switches, as every yes/no one is).
PREFLIGHT_SWITCH = "MEGAPLUG_PREFLIGHT"


#: Set by the switch (``python -m megaplug.megatron``): megaplug runs inside the training
#: job, where pre-flight is on unless ``MEGAPLUG_PREFLIGHT`` turns it off -- what it refuses,
#: Megatron would refuse minutes later on the same node.
UNDER_SWITCH = False
#: Set by torchrun in every process it starts.
_TORCHRUN_VARIABLE = "TORCHELASTIC_RUN_ID"


def preflight_on(env: Mapping[str, str], preflight: bool | None = None) -> bool:
    """Whether the pre-flight checks run: as the caller says; else as ``MEGAPLUG_PREFLIGHT``
    says; else on under the switch and off for the Python API (Megatron's acceptance)."""
    if preflight is not None:
        return preflight
    from ..sources._switches import SwitchError, switch

    try:  # empty is unset; a value neither yes nor no is reported by the plugin selection
        return switch(PREFLIGHT_SWITCH, UNDER_SWITCH, env)
    except SwitchError:
        return UNDER_SWITCH


def in_training_process(env: Mapping[str, str]) -> bool:
    """Whether this process is the training job itself (the switch, or torchrun's worker),
    whose packages and GPU are the target's, rather than a login node describing it."""
    return UNDER_SWITCH or _TORCHRUN_VARIABLE in env


def _with_preflight_switch(env: Mapping[str, str], preflight: bool | None) -> dict[str, str]:
    """``env`` with the pre-flight switch set as :func:`preflight_on` decides."""
    return {**env, PREFLIGHT_SWITCH: "1" if preflight_on(env, preflight) else "0"}


def _target_with_preflight_switch(target: TargetEnvironment | None, env: Mapping[str, str],
                                  preflight: bool | None) -> TargetEnvironment:
    """The target to resolve for, its environment carrying the pre-flight switch; a copy,
    as the caller may reuse its target. Stated by no caller, it is this machine -- and,
    inside the training process, this very process (``own_process``)."""
    if target is None:
        return TargetEnvironment(environ=_with_preflight_switch(env, preflight),
                                 own_process=in_training_process(env))
    base = env if target.environ is None else target.environ
    return target.with_environ(_with_preflight_switch(base, preflight))


class _StandIns:
    """The stand-in for an enum class that declares no counterpart, by the Megatron path
    its stand-in declares (``__megatron_type__``).

    Only a class of Megatron's own package can have one. Most enum values met are not
    (a plugin's enum with no Megatron counterpart, ``signal.Signals``) and are told so by
    their module; the declared enum types (every spec's default and choices, every plugin
    module's enums: a cost docs/performance.md measures) are gathered once, and only when a
    Megatron class is met."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.by_path: dict[str, type] | None = None

    def __call__(self, enum_class: type) -> type | None:
        if enum_class.__module__.partition(".")[0] != "megatron":
            return None
        if self.by_path is None:
            from ._checkpoint import declared_enum_types  # only when a Megatron enum is met

            self.by_path = {}
            for stand_in in declared_enum_types(self.kernel):
                self.by_path.setdefault(getattr(stand_in, "__megatron_type__", None) or "",
                                        stand_in)
        return self.by_path.get(f"{enum_class.__module__}:{enum_class.__qualname__}")


def _provenance_for(values: dict[str, Any], state: NamespaceState, kernel: Kernel,
                    sink: ProblemSink) -> dict[str, Provenance]:
    """Provenance as parsed, except for what the caller changed on the namespace since
    (each such value checked: :func:`_check_caller_edits`)."""
    provenance = dict(state.provenance)
    for key, value in values.items():
        record = provenance.get(key)
        if record is None or (key in state.parsed and state.parsed[key] is not value
                              and state.parsed[key] != value):
            provenance[key] = Provenance("caller-default", _CALLER_EDIT, kernel.table.owner(key),
                                         previous=record, value=value)
    _check_caller_edits(values, provenance, kernel, sink)
    return provenance


def _check_caller_edits(values: dict[str, Any], provenance: Mapping[str, Provenance],
                        kernel: Kernel, sink: ProblemSink) -> None:
    """Text the caller set on the namespace between parse and validate for a number
    setting is a problem naming the setting, never a rule's TypeError: the namespace holds
    parsed values, so ``"4"`` is refused, not parsed. Any other value stays as set, for the
    plugins to judge as Megatron's code would meet it (a bare string where the command line
    makes a list, a dotted enum name). A refused one is left in doubt: its knock-ons (a
    rule raising on it) are not reported."""
    for key, record in provenance.items():
        spec = kernel.table.by_dest.get(key, [None])[0]
        value = values.get(key)
        if (record.detail != _CALLER_EDIT or spec is None or not isinstance(value, str)
                or spec.type not in (int, float) or spec.nargs is not None):
            continue
        sink.add(Problem(f"{key} {_CALLER_EDIT} is the text {_errors.shorten(repr(value), 100)}"
                         f", not {'an int' if spec.type is int else 'a float'}",
                         (spec.primary,), f"set args.{key} to a number", spec.plugin))
        sink.doubtful.add(key)


def parse_and_validate_args(
    extra_args_provider: Callable[[Any], Any] | None = None,
    ignore_unknown_args: bool = False,
    args_defaults: Mapping[str, Any] | None = None,
    *,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    target: TargetEnvironment | None = None,
    torch_types: bool = True,
    register: bool | None = None,
    preflight: bool | None = None,
    print_arguments: bool | None = None,
) -> argparse.Namespace:
    """``parse_args``, the checkpoint's saved arguments (``--use-checkpoint-args``), then
    ``validate_args``, as Megatron's entry points call them; parse and validation problems
    are raised together.

    Then, like Megatron, the namespace is registered as Megatron's global args
    (``megatron.training.get_args()``) and ``--enable-experimental`` turns on
    megatron.core's experimental features. ``register`` says whether to; by default, when
    ``torch_types`` is on and Megatron is installed. ``torch_types=False`` keeps dtypes and
    enums as megaplug's torch-free stand-ins.
    """
    args = _parse(extra_args_provider, ignore_unknown_args, argv, environ, target)
    defaults = dict(args_defaults or {})
    _apply_checkpoint_args(args, defaults)
    validate_args(args, defaults, target=target, environ=environ, torch_types=torch_types,
                  preflight=preflight, print_arguments=print_arguments)
    if register is None:
        register = torch_types and _megatron_installed()
    if register:
        _register_globally(args)
    return args


def _megatron_installed() -> bool:
    from .._startup import find_spec

    return find_spec("megatron") is not None and find_spec("megatron.training") is not None


def _apply_checkpoint_args(args: argparse.Namespace, defaults: Mapping[str, Any]) -> None:
    """Overlay the checkpoint's saved arguments when the command line (or, as Megatron's
    ``args_defaults`` allow, the caller) asks for ``--use-checkpoint-args``."""
    on_command_line = getattr(args, "use_checkpoint_args", False)
    if not (on_command_line or defaults.get("use_checkpoint_args", False)):
        return
    state = state_of(args)
    if state is None or state.problems is None:
        return
    from ._checkpoint_args import load_checkpoint_args

    load_checkpoint_args(args, state.kernel, state.provenance, state.problems,
                         asked_by_caller_only=not on_command_line)
    state.parsed = dict(vars(args))


def _register_globally(args: argparse.Namespace) -> None:
    """Megatron's registration: ``global_vars.set_global_variables`` (args, microbatch
    calculator, tokenizer, timers, writers -- what Megatron's training loop reads) where the
    installed Megatron has it, else ``set_args``; then the experimental flag."""
    from megatron.core.config import set_experimental_flag
    from megatron.training import global_vars

    global_vars._ensure_var_is_not_initialized(global_vars._GLOBAL_ARGS, "args")
    set_global_variables = getattr(global_vars, "set_global_variables", None)
    if set_global_variables is not None:
        set_global_variables(args)
    else:
        global_vars.set_args(args)
    if getattr(args, "enable_experimental", False):
        set_experimental_flag(True)


def provenance(args: argparse.Namespace) -> dict[str, Provenance]:
    """Where each value of a namespace from this module came from, by setting (empty for a
    namespace this module did not make). The mapping is the facade's own record: code that
    changes a value after validation (a checkpoint loader) may record why in it."""
    state = state_of(args)
    return state.provenance if state is not None else {}


def resolution_warnings(args: argparse.Namespace) -> list[Problem]:
    """The warnings raised while validating ``args`` (also printed on rank 0)."""
    state = state_of(args)
    return list(state.warnings) if state is not None else []
