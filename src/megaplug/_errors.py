"""Problems and the one exception that carries them."""

from __future__ import annotations

from typing import Iterable, Sequence

from ._record import FrozenRecord, MutableRecord


class Problem(FrozenRecord):
    """One thing wrong with a configuration (or, among ``Resolved.warnings``, suspicious).

    ``flags`` names the flags involved (option strings such as ``--num-experts`` or
    dests such as ``num_experts``; the kernel shows dests as their primary spelling).
    ``plugin`` and ``rule`` are filled in by the kernel with the plugin, and the declared
    rule of it, that reported the problem.
    """

    __slots__ = ("message", "flags", "hint", "plugin", "rule")
    message: str
    flags: tuple[str, ...]
    hint: str | None
    plugin: str | None
    rule: str | None

    def __init__(self, message: str, flags: Sequence[str] = (), hint: str | None = None,
                 plugin: str | None = None, rule: str | None = None) -> None:
        flags = tuple(flags)
        self._fill(locals())

    def __str__(self) -> str:
        return ((f"[{self.plugin}] " if self.plugin else "") + self.message
                + (f" (hint: {self.hint})" if self.hint else ""))

    def to_dict(self) -> dict[str, object]:
        return {"plugin": self.plugin, "rule": self.rule, "message": self.message,
                "flags": list(self.flags), "hint": self.hint}


class ConfigError(Exception):
    """Raised once per resolve with every problem that was found.

    ``problems`` is never empty. ``str(error)`` lists them one per line. ``warnings`` are
    the warnings the same resolve raised (a checkpoint that was skipped, a deprecated flag):
    a failed resolve must not hide them.
    """

    def __init__(self, problems: Iterable[Problem], warnings: Iterable[Problem] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.warnings: tuple[Problem, ...] = tuple(warnings)
        count = len(self.problems)
        super().__init__("\n".join([f"{count} problem{'s' if count != 1 else ''} in the "
                                    "configuration:", *(f"  - {p}" for p in self.problems)]))


class PluginError(Exception):
    """A plugin is declared wrongly (a flag owned twice, an ordering cycle, ...)."""


class ProblemSink(MutableRecord):
    """Collects problems and warnings, stamping each with the plugin (and the rule of it)
    currently speaking.

    ``doubtful`` holds the settings a parse problem left in doubt (a value that could not
    be read, a misspelt flag's intended setting, everything an unreadable config file might
    have set): a plugin's problem involving one of them is a knock-on of that first
    mistake, and the kernel does not report it.
    """

    __slots__ = ("problems", "warnings", "current_plugin", "current_rule", "doubtful")

    def __init__(self, problems: list[Problem] | None = None,
                 warnings: list[Problem] | None = None,
                 current_plugin: str | None = None) -> None:
        self.problems: list[Problem] = [] if problems is None else problems
        self.warnings: list[Problem] = [] if warnings is None else warnings
        self.current_plugin = current_plugin
        self.current_rule: str | None = None
        self.doubtful: set[str] = set()

    def error(self, message: str, *, flags: Sequence[str] = (),
              hint: str | None = None) -> None:
        self.add(Problem(message, flags, hint))

    def warn(self, message: str, *, flags: Sequence[str] = (), hint: str | None = None,
             plugin: str | None = None) -> None:
        self.warnings.append(self._stamped(Problem(message, flags, hint, plugin)))

    def add(self, problem: Problem) -> None:
        self.problems.append(self._stamped(problem))

    def _stamped(self, problem: Problem) -> Problem:
        return problem if problem.plugin is not None else Problem(
            problem.message, problem.flags, problem.hint, self.current_plugin, self.current_rule)
