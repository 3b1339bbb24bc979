"""Problems and the one exception that carries them."""

from __future__ import annotations


from ._record import FrozenRecord, MutableRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence


class Problem(FrozenRecord):
    """One thing wrong with a configuration (or, among ``Resolved.warnings``, suspicious).

    ``flags`` names the flags involved (option strings such as ``--num-experts``, or dests,
    shown as their primary spelling). The kernel fills in ``plugin`` and ``rule``: who
    reported it.
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


#: Unrecognized arguments, settings and stray values reported one by one in a resolve; the
#: rest are counted in one problem (100,000 of them must not cost minutes or megabytes).
MAX_UNRECOGNIZED_SHOWN = 50
#: "Did you mean" searches per resolve, and the longest name searched for (no flag is
#: longer than a few dozen characters; difflib's cost grows with the name).
MAX_SUGGESTIONS = 20
MAX_SUGGESTED_LENGTH = 200
#: Problems listed in a report (``str(ConfigError)``, the CLI's stderr), and the longest
#: text shown for one (a value of a million characters is not echoed whole).
MAX_PROBLEMS_SHOWN = 200
MAX_PROBLEM_CHARS = 2000


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the candidate closest to a misspelt ``name``, or ``""``."""
    import difflib  # only a misspelt name pays for it

    near = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f" (did you mean {near[0]}?)" if near else ""


def shorten(text: str, limit: int = MAX_PROBLEM_CHARS) -> str:
    """``text``, or its start and a count of what was left out when longer than ``limit``."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def report_lines(problems: Sequence[Problem]) -> list[str]:
    """A count, each problem shortened (at most MAX_PROBLEMS_SHOWN), how many were left out."""
    count = len(problems)
    lines = [f"{count} problem{'s' if count != 1 else ''} in the configuration:"]
    lines += [f"  - {shorten(str(problem))}" for problem in problems[:MAX_PROBLEMS_SHOWN]]
    if count > MAX_PROBLEMS_SHOWN:
        lines.append(f"  ... and {count - MAX_PROBLEMS_SHOWN} more problems, not listed")
    return lines


class ConfigError(Exception):
    """Raised once per resolve with every problem found (never none), one per line.

    ``warnings`` are the same resolve's warnings (a skipped checkpoint, a deprecated flag):
    a failed resolve must not hide them.
    """

    def __init__(self, problems: Iterable[Problem], warnings: Iterable[Problem] = ()) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        self.warnings: tuple[Problem, ...] = tuple(warnings)
        super().__init__("\n".join(report_lines(self.problems)))

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled (a worker's error sent to its parent) by its problems, not its report text
        return type(self), (self.problems, self.warnings)


class PluginError(Exception):
    """A plugin is declared wrongly (a flag owned twice, an ordering cycle, ...)."""


class ProblemSink(MutableRecord):
    """Collects problems and warnings; whoever reports one names the plugin (and rule)
    speaking, or the kernel does for a problem a rule returns.

    ``doubtful`` holds the settings a parse problem left in doubt (an unreadable value, a
    misspelt flag's intended setting, all an unreadable config file might have set): a
    plugin's problem involving one of them is a knock-on of that first mistake, and the
    kernel does not report it.
    """

    __slots__ = ("problems", "warnings", "doubtful", "unrecognized", "suggestions_left")

    def __init__(self, problems: list[Problem] | None = None) -> None:
        self.problems: list[Problem] = [] if problems is None else problems
        self.warnings: list[Problem] = []
        self.doubtful: set[str] = set()
        #: Unrecognized arguments and settings met (past MAX_UNRECOGNIZED_SHOWN, only counted).
        self.unrecognized = 0
        #: "Did you mean" searches still allowed in this resolve.
        self.suggestions_left = MAX_SUGGESTIONS

    def error(self, message: str, *, flags: Sequence[str] = (), hint: str | None = None,
              plugin: str | None = None, rule: str | None = None) -> None:
        self.problems.append(Problem(message, flags, hint, plugin, rule))

    def warn(self, message: str, *, flags: Sequence[str] = (), hint: str | None = None,
             plugin: str | None = None, rule: str | None = None) -> None:
        self.warnings.append(Problem(message, flags, hint, plugin, rule))

    def add(self, problem: Problem, plugin: str | None = None, rule: str | None = None) -> None:
        """Add a problem; one that names no plugin is stamped with ``plugin`` and ``rule``
        (the rule that returned it)."""
        self.problems.append(problem if problem.plugin is not None or plugin is None else
                             Problem(problem.message, problem.flags, problem.hint, plugin, rule))
