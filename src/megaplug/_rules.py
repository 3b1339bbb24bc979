"""A plugin's normalizations, derivations and checks, declared as data for the kernel."""

from __future__ import annotations

from ._record import FrozenRecord
from .hookspecs import PHASES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable

    #: A rule: a small function of the draft. A check may also return or yield Problems.
    Rule = Callable[[Any], Any]
    Condition = Callable[[Any], bool]


class RuleStep(FrozenRecord):
    """One declared rule: its function, its name, and the condition it runs under.

    A step with a ``group`` (``"module:NAME"``) stands for the rules that module lists,
    imported only once the condition holds (without one, when its phase first runs).
    """

    __slots__ = ("function", "name", "when", "group")
    function: Rule
    name: str | None
    when: Condition | None
    group: str | None

    def __init__(self, function: Rule, name: str | None = None,
                 when: Condition | None = None, group: str | None = None) -> None:
        if not callable(function) or (when is not None and not callable(when)):
            raise TypeError(f"a rule and its condition must be callable, got {function!r}")
        self._fill(locals())

    def rules(self) -> list[RuleStep]:
        """A group's rules, each a step under the group's condition (imported now)."""
        from ._registry import resolve_reference

        from .sources._declarations import checked_rule_table

        functions = checked_rule_table(str(self.group), resolve_reference(str(self.group)))
        return [RuleStep(f, getattr(f, "__name__", None), self.when) for f in functions]


def _unloaded(_: Any) -> None:
    raise RuntimeError("a group of rules runs each of its rules, not itself")


def _step(function: Rule | str, when: Condition | None) -> RuleStep:
    """A declared rule, or a named group of rules (under ``when``, if given), as a step."""
    if not isinstance(function, str):
        return RuleStep(function, getattr(function, "__name__", None), when)
    if ":" not in function:
        raise TypeError("a rule must be callable, or name a module's list of rules "
                        f"('module:NAME'), got {function!r}")
    return RuleStep(_unloaded, function, when, function)


class Rules:
    """A plugin's normalizations, derivations and checks, declared as data.

    The kernel runs a phase's rules in declared order, after the plugin's own hook for
    that phase, naming the rule in the provenance it records and the problems it reports;
    a rule that raises is reported and the others still run. Declare rules with
    decorators (``@rules.derive``), as a table (``Rules(validate=(check_a, check_b))``),
    or as a group under a condition (``rules.validate(check_a, check_b, when=uses_x)``),
    and pass them as ``PluginInfo(rules=rules)``.

    A group may be named instead (``rules.validate("pkg.checks:CHECKS", when=uses_x)``):
    its module is imported only in a resolve where the condition holds, or, without one,
    when the phase first runs -- so listing or documenting plugins imports no rules.
    ``rules.supersede("parallel.check_x", when=uses_fsdp)`` skips another plugin's rule
    while the feature is in use, so a built-in rule stays free of feature settings.
    """

    __slots__ = ("steps", "superseded")

    def __init__(self, *, normalize: Iterable[Rule] = (), derive: Iterable[Rule] = (),
                 validate: Iterable[Rule] = ()) -> None:
        #: The declared rules of each phase, in order.
        self.steps: dict[str, list[RuleStep]] = {phase: [] for phase in PHASES}
        #: Other plugins' rules (``"plugin.rule"``) this plugin takes over, and when.
        self.superseded: list[tuple[str, Condition]] = []
        self.normalize(*normalize)
        self.derive(*derive)
        self.validate(*validate)

    def __repr__(self) -> str:
        shown = (f"{phase}=({', '.join(str(step.name) for step in steps)})"
                 for phase, steps in self.steps.items() if steps)
        return f"Rules({', '.join(shown)})"

    def _declare(self, phase: str, rules: tuple[Rule | str, ...],
                 when: Condition | None) -> Any:
        def declare(*functions: Rule | str) -> Rule | str | None:
            self.steps[phase].extend(_step(function, when) for function in functions)
            return functions[0] if functions else None

        return declare(*rules) if rules else declare

    def normalize(self, *rules: Rule | str, when: Condition | None = None) -> Any:
        """Declare normalizations; returns the first, so it works as a decorator."""
        return self._declare("normalize", rules, when)

    def derive(self, *rules: Rule | str, when: Condition | None = None) -> Any:
        """Declare derivations; returns the first, so it works as a decorator."""
        return self._declare("derive", rules, when)

    def validate(self, *rules: Rule | str, when: Condition | None = None) -> Any:
        """Declare checks; returns the first, so it works as a decorator."""
        return self._declare("validate", rules, when)

    def supersede(self, *rules: str, when: Condition) -> None:
        """Skip other plugins' rules (named ``"plugin.rule"``) whenever ``when`` holds."""
        self.superseded.extend((rule, when) for rule in rules)
