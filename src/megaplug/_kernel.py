"""The resolve pipeline: declare, parse (fill values from every source), then run the phases."""

from __future__ import annotations

import argparse
import time

from ._config import Draft, Provenance, ReadOnlyError, Resolved
from ._errors import (MAX_SUGGESTED_LENGTH, MAX_UNRECOGNIZED_SHOWN, ConfigError, PluginError,
                      Problem, ProblemSink, shorten)
from ._options import FlagSpec, choice_name
from ._plugins import (ACTIVE, BLOCKED, BROKEN, UNAVAILABLE, PluginInfo, PluginRecord,
                       PluginSet, describe_failure)
from ._registry import Declaration, Declared, declare
from ._rules import RuleStep
from .sources._declarations import reference_problems, unresolved
from .sources._config_files import ConfigFileError, load_config_file, spelled_twice
from .environment import TargetEnvironment
from .environment._environment import OTHER_LINE_HINT
from .environment._narrow import back_to_release, report_lines, withheld_defaults
from .sources._command_line import NEGATIVE_NUMBER, Occurrence, split
from .sources._selection import is_shipped
from .values._encoding import fresh
from .values._read_log import refused_by
from .values._conversion import conversion_problem as _conversion_problem
from .hookspecs import HOOKS, PHASES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping, Sequence


class Kernel:
    """The flag table of one plugin set, and the resolve pipeline over it.

    Building a kernel runs every plugin's ``add_args`` once; ``resolve`` may then be
    called any number of times. Not thread-safe: use one kernel per thread.
    """

    def __init__(self, plugins: PluginSet, *, snapshot: bool = False,
                 lines: Mapping[str, str] | None = None) -> None:
        started = time.perf_counter()
        self.plugins = plugins
        #: The release line of each package the table is for (``{"megatron_core": "0.17"}``).
        self.lines: dict[str, str] = dict(lines or {})
        self.setup_problems: list[Problem] = [Problem(
            f"plugin {r.name!r} ({r.where()}) is broken: {r.reason}", plugin=r.name,
            hint=f"fix or uninstall it, or block it with -p no:{r.name}")
            for r in plugins.records.values() if r.status == BROKEN]
        self.setup_problems += [Problem(message, hint=hint)
                                for message, hint in plugins.selection_problems]
        #: Option strings of inactive plugins, to name them when one is used.
        self.inactive_flags: dict[str, PluginRecord] = {}
        #: The flag specs an inactive plugin would declare, by plugin (``megaplug flags``).
        self.inactive_specs: dict[str, list[FlagSpec]] = {}
        #: The files a table read back from the snapshot was declared from (path -> state):
        #: an answer computed from this kernel depends on them too.
        self.sources: dict[str, str | None] = {}
        #: Seconds per stage: "add_args", then "parse" and each phase of the latest resolve.
        self.timings: dict[str, float] = {}
        self._steps, self._superseded = self._collect_steps()
        #: The rules of each group named by reference (``"module:NAME"``), once imported.
        self._groups: dict[str, list[RuleStep]] = {}
        self.references_checked = False
        if snapshot:  # the table as a previous process declared it, while nothing changed
            from .cache._flag_table import declare_or_read

            declared, sources = declare_or_read(plugins.records.values(), self.lines,
                                                self._declare_all, self._storable)
            if sources is not None:  # read back: it was stored only once its names checked
                self.sources, self.references_checked = sources, True
        else:
            declared = self._declare_all()
        self._adopt(declared)
        self.timings["add_args"] = time.perf_counter() - started

    # -- set-up ----------------------------------------------------------------------

    def _collect_steps(self) -> tuple[dict[str, dict[str, list[RuleStep]]],
                                      dict[str, list[Callable[[Any], bool]]]]:
        """Each active plugin's work per hook (its hook implementation, then its rules), and
        for each superseded rule (``"plugin.rule"``) the conditions that take it over."""
        steps: dict[str, dict[str, list[RuleStep]]] = {}
        superseded: dict[str, list[Callable[[Any], bool]]] = {}
        for record in self.plugins.active():
            rules = record.info.rules if record.info else None
            hooks = self.plugins.implementations.get(record.name, {})
            steps[record.name] = {hook: [*_hook_step(hooks.get(hook)),
                                         *(rules.steps.get(hook, ()) if rules else ())]
                                  for hook in HOOKS}
            for rule, when in rules.superseded if rules else ():
                superseded.setdefault(rule, []).append(when)
        return steps, superseded

    def _declare_all(self) -> Declared:
        """Every plugin's declaration: built-ins, then shipped plugins first (one claiming
        their flag is the one broken), then the inactive plugins' spellings."""
        active = sorted(self.plugins.active(), key=lambda r: (r.source != "builtin",
                                                              not is_shipped(r)))
        return declare([*(Declaration(r.name, r.info.options if r.info else None, tuple(
            step.function for step in self._steps[r.name]["add_args"])) for r in active),
            *(_inactive_declaration(r, r.module) for r in self.plugins.records.values()
              if r.status != ACTIVE and r.module is not None)], self.lines)

    def _storable(self, declared: Declared) -> bool:
        """Whether a table just declared may be stored: no failure, and every name holds."""
        problems = len(self.setup_problems)
        if not declared.failures:  # else they are checked, and reported, at the first parse
            self.check_references()
        return not declared.failures and len(self.setup_problems) == problems

    def _adopt(self, declared: Declared) -> None:
        """Take a declaration (made here or read back) as this kernel's: its table, the
        inactive plugins' flags, and each plugin whose declaration raised, broken."""
        self.table = declared.table
        for name, exc in declared.failures.items():
            self._broken(self.plugins.records[name], exc)
        for name, specs in declared.inactive.items():
            self._learn(self.plugins.records[name], specs)

    def check_references(self) -> None:
        """Check, once, every name the plugins' ``PluginInfo`` give (their problems join
        ``setup_problems``): before a declared table is stored, so one read back was
        checked, and otherwise before the first parse -- listing plugins imports no rules."""
        if not self.references_checked:
            self.references_checked = True
            self.setup_problems += [Problem(message, plugin=plugin, hint=(
                f"correct the name in plugin {plugin!r}'s PluginInfo, or block it with -p no:"
                f"{plugin}")) for plugin, message in reference_problems(self.plugins.records)]

    def _broken(self, record: PluginRecord, exc: BaseException) -> None:
        """Mark a plugin whose declaration raised broken, with the problem saying why."""
        name, message = record.name, str(exc)
        if isinstance(exc, PluginError):
            record.reason, hint = message, (
                f"rename it, or block plugin {name!r} with -p no:{name}" if " both " in message
                else f"correct plugin {name!r}'s declaration, or block it with -p no:{name}")
        else:
            record.reason = f"add_args raised {describe_failure(exc)}"
            message = f"plugin {name!r} ({record.where()}) raised {type(exc).__name__} in " \
                      f"add_args: {exc}"
            hint = f"this is a bug in the plugin; block it with -p no:{name}"
        record.status = BROKEN
        self.setup_problems.append(Problem(message, plugin=name, hint=hint))

    def _learn(self, record: PluginRecord, specs: list[FlagSpec]) -> None:
        """Learn an inactive plugin's specs, and the spellings the table lacks (to name it)."""
        self.inactive_specs.setdefault(record.name, specs)
        for option in (option for spec in specs for option in spec.option_strings):
            if option not in self.table.by_option:
                self.inactive_flags.setdefault(option, record)

    def parser(self) -> argparse.ArgumentParser:
        """An argparse parser of every flag, grouped by plugin, for ``--help``; resolving
        never goes through argparse."""
        parser = argparse.ArgumentParser(
            prog="megaplug", allow_abbrev=False, argument_default=argparse.SUPPRESS,
            description="Arguments resolved by megaplug, grouped by plugin.")
        groups: dict[str, Any] = {}
        for spec in (spec for spec in self.table if spec.kind == "flag"):
            if spec.plugin not in groups:
                record = self.plugins.records.get(spec.plugin)
                groups[spec.plugin] = parser.add_argument_group(
                    f"plugin {spec.plugin}",
                    (record.info.description if record and record.info else "") or None)
            strings, kwargs = spec.argparse_call()
            groups[spec.plugin].add_argument(*strings, **{**kwargs, "default": argparse.SUPPRESS})
        return parser

    # -- parsing: every source through one conversion ------------------------------------

    def resolve(self, argv: Sequence[str] = (), **sources: Any) -> Resolved:
        """Resolve a command line plus the other ``sources`` :meth:`parse` takes (files,
        environment, caller defaults, target), or raise ``ConfigError`` with every problem."""
        return self.finish(*self.parse(argv, **sources))

    def parse(self, argv: Sequence[str] = (), *, config_files: Sequence[str] = (),
              defaults: Mapping[str, Any] | None = None,
              environ: Mapping[str, str] | None = None,
              target: TargetEnvironment | None = None, ignore_unknown: bool = False,
              ) -> tuple[Draft, ProblemSink]:
        """Fill values from every source, without running the plugin phases."""
        started = time.perf_counter()
        self.check_references()
        sink = ProblemSink(problems=list(self.setup_problems))
        if target is None:
            target = TargetEnvironment(environ=environ)
        elif environ is not None and target.environ is None:
            target = target.with_environ(environ)  # the caller may reuse it elsewhere
        report_lines(target, sink)
        if self.lines and (other := target.other_line_than(self.lines)):
            sink.add(Problem(other, hint=OTHER_LINE_HINT))
        values = {dest: fresh(specs[0].default) for dest, specs in self.table.by_dest.items()}
        # records are immutable: the ~900 defaults share one per plugin
        declared = {plugin: Provenance("default", plugin=plugin)
                    for plugin in {specs[0].plugin for specs in self.table.by_dest.values()}}
        provenance = {dest: declared[specs[0].plugin] for dest, specs in self.table.by_dest.items()}
        unread = [path for path in config_files
                  if not self._apply_config_file(path, values, provenance, sink)]
        for variable, spec in self.table.by_env.items():
            if (raw := target.getenv(variable)) is not None:
                value = self.convert(spec, raw, source="environment", detail=variable)
                _give(values, provenance, spec, value, sink, variable, "environment")
        self._apply_command_line(argv, values, provenance, sink, ignore_unknown)
        if unread:  # only what the command line and environment set outranks a lost file
            sink.doubtful.update(dest for dest, record in provenance.items()
                                 if record.source not in ("command-line", "environment"))
        self._check_mutex(provenance, sink)
        if defaults:
            self.apply_caller_defaults(defaults, values, provenance, sink)
        if sink.unrecognized > MAX_UNRECOGNIZED_SHOWN:
            sink.add(Problem(f"... and {sink.unrecognized - MAX_UNRECOGNIZED_SHOWN} more "
                             "unrecognized arguments or settings, not listed one by one",
                             hint="megaplug flags WORD lists the accepted flags"))
        self.timings["parse"] = time.perf_counter() - started
        return Draft(values, provenance, self.table, sink, target), sink

    def convert(self, setting: FlagSpec | str, raw: Any, *, source: str = "command-line",
                detail: str = "") -> Any:
        """``raw`` in the setting's type, or a :class:`Problem` saying why it is not.

        The one conversion every source goes through (command line, environment, config
        files, caller defaults, checkpoint arguments); the problem names ``source`` and its
        ``detail`` (a path, a variable). ``setting`` is a spec, a dest or an option string;
        a name no plugin declares comes back unchanged.
        """
        spec = setting if isinstance(setting, FlagSpec) else self.table.lookup(setting)
        if spec is None:
            return raw
        try:
            value = spec.convert(raw)
        except ValueError as exc:
            return _conversion_problem(spec, raw, str(exc), source, detail)
        if spec.check_choice(value):
            return value
        shown = [choice_name(v) for v in value] if isinstance(value, list) else choice_name(value)
        return _conversion_problem(spec, raw, f"invalid choice {shorten(repr(shown), 200)}",
                                   source, detail)

    def _apply_config_file(self, path: str, values: dict[str, Any],
                           provenance: dict[str, Provenance], sink: ProblemSink) -> bool:
        """Apply one config file; False when it cannot be read at all."""
        try:
            data = load_config_file(path)
        except ConfigFileError as exc:
            sink.add(Problem(str(exc), ("--config",), "check the path and the file's syntax"))
            return False
        sink.problems += spelled_twice(data, f"config file {path}", self.table)
        for key, raw in data.items():
            spec = self.table.lookup(str(key))
            if spec is None:
                self._unknown_setting(str(key), f"config file {path}", sink)
            elif spec.kind == "computed":
                sink.add(Problem(f"{key!r} in config file {path} is computed by plugin "
                                 f"{spec.plugin!r} and cannot be set", (str(key),),
                                 "remove it; megaplug derives it from other settings",
                                 spec.plugin))
            else:
                _give(values, provenance, spec, self.convert(spec, raw, source="config-file",
                                                             detail=path), sink, path)
        return True

    def _apply_command_line(self, argv: Sequence[str], values: dict[str, Any],
                            provenance: dict[str, Provenance], sink: ProblemSink,
                            ignore_unknown: bool) -> None:
        tokens = split(argv, self.table.by_option)
        if tokens.wants_help:
            self.parser().print_help()
            raise SystemExit(0)
        for message in tokens.errors:
            # every splitting error reads "argument SPELLING: what was wrong"
            spelling = message.removeprefix("argument ").partition(":")[0]
            spec = self.table.by_option.get(spelling)
            if spec is not None:
                sink.doubtful.add(spec.dest)
            sink.add(Problem(f"command line: {message}", (spelling,) if spec else (),
                             "megaplug flags WORD lists the accepted flags and what they take"))
        for occurrence in tokens.occurrences:
            spec, spelling = occurrence.spec, occurrence.spelling
            value = self._occurrence_value(occurrence, values)
            _give(values, provenance, spec, value, sink, spelling, "command-line")
            if spec.deprecated and not isinstance(value, Problem):
                sink.warn(f"{spelling} is deprecated: {spec.deprecated}", flags=(spelling,),
                          plugin=spec.plugin)
        skip_values = False  # the values after an unknown flag are its own
        for token in () if ignore_unknown else tokens.unknown:
            if token.startswith("-") and not NEGATIVE_NUMBER.match(token) and token != "--":
                skip_values = True
                self._unknown_setting(token.split("=", 1)[0], "command line", sink)
            elif not skip_values and token != "--" and _shown_unrecognized(sink):
                sink.add(Problem(f"unexpected argument {shorten(repr(token), 200)}",
                                 hint="values must follow the flag they belong to"))

    def _occurrence_value(self, occurrence: Occurrence, values: dict[str, Any]) -> Any:
        """The value one use of a flag stands for, with argparse's action semantics."""
        spec, raw = occurrence.spec, occurrence.raw
        if spec.action in ("store_true", "store_false", "store_const") or (
                raw is None and spec.takes_value):  # nargs "?" without a value
            return spec.const
        if spec.action == "boolean_optional":
            return not occurrence.spelling.startswith("--no-")
        current = values.get(spec.dest)
        if spec.action == "count":
            return (current if isinstance(current, int) else 0) + 1
        value = self.convert(spec, raw)
        if spec.action != "append" or isinstance(value, Problem):
            return value
        return [*(current if isinstance(current, list) else []), value]

    def _unknown_setting(self, name: str, where: str, sink: ProblemSink) -> None:
        """Report a setting no active plugin declares: an inactive plugin's, or unknown."""
        option = name if name.startswith("-") else "--" + name.replace("_", "-")
        if option not in self.inactive_flags:
            self._learn_blocked()
        record = self.inactive_flags.get(option)
        if record is not None:
            hint = ("install the missing package, or drop the flag"
                    if record.status == UNAVAILABLE else
                    f"remove -p no:{record.name} / MEGAPLUG_DISABLE, or drop the flag")
            return sink.add(Problem(f"{option} belongs to plugin {record.name!r}, which is "
                                    f"{record.status}: {record.reason}", (option,), hint,
                                    record.name))
        if not _shown_unrecognized(sink):
            return
        suggestion = None
        if sink.suggestions_left > 0 and len(option) <= MAX_SUGGESTED_LENGTH:
            sink.suggestions_left -= 1
            suggestion = self.table.suggest(option)
        if suggestion is not None:
            sink.doubtful.add(self.table.by_option[suggestion].dest)
        shown = shorten(name, 200)
        elsewhere = self.table.elsewhere.get(option)
        sink.add(Problem(f"unrecognized argument {shown} in {where}", (shown,),
                         f"it exists only in {elsewhere}, not in the target's release"
                         if elsewhere else f"did you mean {suggestion}?" if suggestion
                         else "see megaplug flags"))

    def _learn_blocked(self) -> None:
        """Learn the blocked plugins' flags: they are imported only now, on the error path."""
        for record in self.plugins.records.values():
            if record.status == BLOCKED and record.loader is not None:
                loader, record.loader = record.loader, None
                try:
                    learned = declare([_inactive_declaration(record, loader())], {}).inactive
                except (Exception, SystemExit):  # one failing even to import is skipped
                    continue
                for specs in learned.values():
                    self._learn(record, specs)

    def _check_mutex(self, provenance: dict[str, Provenance], sink: ProblemSink) -> None:
        for dests in self.table.mutex_groups:
            given = [d for d in dests if provenance[d].source != "default"]
            if len(given) > 1:
                spelled = [self.table.spelling(d) for d in given]
                sink.add(Problem(f"{' and '.join(spelled)} cannot be used together",
                                 tuple(spelled), "keep one of them", self.table.owner(given[0])))

    def apply_caller_defaults(self, defaults: Mapping[str, Any], values: dict[str, Any],
                              provenance: dict[str, Provenance], sink: ProblemSink) -> None:
        """Apply a caller's defaults (Megatron's ``args_defaults``) to parsed ``values``:
        they fill settings that are still None; a different given value wins, with a warning."""
        sink.problems += spelled_twice(defaults, "the caller's defaults", self.table)
        for key, raw in defaults.items():
            if not isinstance(key, str):
                sink.add(Problem(f"the caller's defaults name a setting by {key!r} "
                                 f"({type(key).__name__})", hint="name settings by text, "
                                 "such as num_layers"))
                continue
            value = self.convert(key, raw, source="caller-default")
            key = spec.dest if (spec := self.table.lookup(key)) is not None else key
            current = values.get(key)
            if current is None:
                _give(values, provenance, key, value, sink, "", "caller-default",
                      self.table.owner(key))
            elif isinstance(value, Problem):
                sink.add(value)  # wrong even where another source's value is kept
            elif current != value:
                sink.warn(f"keeping {key}={current!r} over the caller's default {value!r}",
                          flags=(key,), plugin=self.table.owner(key))

    # -- the phases: each plugin's hook and rules, in the declared order ---------------------

    def finish(self, draft: Draft, sink: ProblemSink) -> Resolved:
        """Run normalize, derive and validate over a parsed draft; raise if any problem."""
        order = [record for record in self.plugins.active() if record.status == ACTIVE]
        parse_problems = len(sink.problems)
        refused: set[str] = set()  # what a plugin refused of its own: knock-ons not bugs
        draft.settle(*withheld_defaults(self.table, draft, draft.provenance(), Provenance))
        for phase in PHASES:
            started = time.perf_counter()
            # validate may only report: mutable values are compared to a copy after each step
            copies = draft.mutable_values() if phase == "validate" else None
            for record in order:
                for step in self._phase_steps(record, phase, draft, sink):
                    self._run(step, record, phase, draft, sink, copies, refused)
            self.timings[phase] = time.perf_counter() - started
        if sink.doubtful:  # a problem about a setting a parse problem left in doubt
            sink.problems[parse_problems:] = [p for p in sink.problems[parse_problems:]
                                              if not self._knock_on(p, sink.doubtful)]
        if sink.problems:
            raise ConfigError(_first_of_each(sink.problems), sink.warnings)
        taken = draft.withdraw([dest for dest in self.table.withheld if dest in draft])
        draft.settle(*back_to_release(self.table, taken, draft))
        return draft.resolved([record.name for record in order])

    def _phase_steps(self, record: PluginRecord, phase: str, draft: Draft,
                     sink: ProblemSink) -> list[RuleStep]:
        """A plugin's steps of a phase, a group of rules named by reference standing for its
        rules where its condition holds (imported once per process): they share it, and
        nothing runs between them."""
        steps: list[RuleStep] = []
        for step in self._steps[record.name][phase]:
            if step.group is None:
                steps.append(step)
            elif _may_apply(step, draft):
                rules = self._groups.get(step.group)
                if rules is None:
                    try:
                        rules = self._groups[step.group] = step.rules()
                    except Exception as exc:  # noqa: BLE001  (load-time check reported it too)
                        sink.error(unresolved(record.name, f"the rules {step.group}",
                                              str(step.group), exc), plugin=record.name,
                                   rule=step.name, hint=f"reinstall the plugin, or block it "
                                   f"with -p no:{record.name}")
                        continue
                steps += rules
        return steps

    def _knock_on(self, problem: Problem, doubtful: set[str]) -> bool:
        """Whether a plugin's problem involves a setting an earlier problem left in doubt."""
        specs = (self.table.lookup(flag) or self.table.by_env.get(flag) for flag in problem.flags)
        return any(spec is not None and spec.dest in doubtful for spec in specs)

    def _run(self, step: RuleStep, record: PluginRecord, phase: str, draft: Draft,
             sink: ProblemSink, copies: dict[str, Any] | None, refused: set[str]) -> None:
        """Run one hook or rule on the draft as that rule sees it, blaming the plugin and
        rule for whatever goes wrong (and undoing what it changed in place in validate) --
        except raising on a value in doubt or ``refused`` (which it adds its own to)."""
        name, rule = record.name, step.name
        view = draft.for_rule(phase, name, rule)
        doubted, before = sink.doubtful | refused, len(sink.problems)
        reads = view.watch_reads() if doubted else None  # after a refusal only
        superseded = self._superseded.get(f"{name}.{rule}", ())
        try:
            if (step.when is None or step.when(view)) and not any(
                    when(view) for when in superseded):
                for problem in step.function(view) or ():
                    sink.add(problem, name, rule)
        except ReadOnlyError as exc:
            sink.error(str(exc), hint="move the change to a derive or normalize hook",
                       plugin=name, rule=rule)
        except (Exception, SystemExit) as exc:
            if reads is not None and reads & doubted:  # a refused value's knock-on: no bug
                return
            sink.error(f"plugin {name!r} ({record.where()}) raised {type(exc).__name__} "
                       f"in {phase}{f' rule {rule}' if rule else ''}: {exc}",
                       hint=f"this is a bug in the plugin; block it with -p no:{name}",
                       plugin=name, rule=rule)
        refused.update(refused_by(name, sink.problems[before:], self.table))
        changed = view.undo_changes(copies) if copies else []
        if changed:
            sink.error(f"plugin {name!r} changed {', '.join(changed)} in validate",
                       flags=changed, hint="validate must only report problems", plugin=name,
                       rule=rule)


def _shown_unrecognized(sink: ProblemSink) -> bool:
    """Count one more unrecognized argument; whether it is still reported on its own."""
    sink.unrecognized += 1
    return sink.unrecognized <= MAX_UNRECOGNIZED_SHOWN


def _may_apply(group: RuleStep, draft: Draft) -> bool:
    """Whether a group's condition holds (or it has none); one that raises holds (each rule
    then reports it)."""
    try:
        return group.when is None or bool(group.when(draft))
    except Exception:  # noqa: BLE001
        return True


def _inactive_declaration(record: PluginRecord, module: Any) -> Declaration:
    """What an inactive plugin's ``module`` declares; an unavailable one's releases count."""
    function = getattr(module, "add_args", None)
    info = getattr(module, "megaplug_plugin", None)
    return Declaration(record.name, info.options if isinstance(info, PluginInfo) else None,
                       (function,) if hasattr(function, "megaplug_impl") else (), active=False,
                       releases=record.status == UNAVAILABLE)


def _hook_step(implementation: tuple[Any, tuple[str, ...]] | None) -> list[RuleStep]:
    """A hook implementation (function, argument names) as a list of zero or one step."""
    if implementation is None:
        return []
    function, arguments = implementation
    return [RuleStep(function if arguments else lambda _: function())]


def _give(values: dict[str, Any], provenance: dict[str, Provenance], setting: FlagSpec | str,
          value: Any, sink: ProblemSink, detail: str, source: str = "config-file",
          plugin: str | None = None) -> None:
    """Set a value some source gave, with its provenance; a :class:`Problem` is reported,
    and leaves its setting in doubt (its knock-ons are not reported)."""
    dest = setting if isinstance(setting, str) else setting.dest
    if isinstance(value, Problem):
        sink.add(value)
        sink.doubtful.add(dest)
        return
    values[dest] = value
    provenance[dest] = Provenance(source, detail, plugin if isinstance(setting, str)
                                  else setting.plugin, previous=provenance.get(dest), value=value)


def _first_of_each(problems: Iterable[Problem]) -> list[Problem]:
    """The problems without repeats (the same plugin saying the same thing)."""
    unique: dict[tuple[Any, ...], Problem] = {}
    for problem in problems:
        unique.setdefault((problem.plugin, problem.message), problem)
    return list(unique.values())
