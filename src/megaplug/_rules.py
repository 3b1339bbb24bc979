"""A plugin's normalizations, derivations and checks, declared as data for the kernel."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ._record import FrozenRecord
from .hookspecs import PHASES

#: A rule: a small function of the draft. A check may also return or yield Problems.
Rule = Callable[[Any], Any]
Condition = Callable[[Any], bool]


class RuleStep(FrozenRecord):
    """One declared rule: its function, its name, and the condition it runs under.

    A step with a ``group`` stands for the rules a module lists (``"module:NAME"``), all
    under the step's condition; the kernel imports them only once the condition holds.
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
        from ._values import resolve_reference

        functions = resolve_reference(str(self.group))
        return [RuleStep(f, getattr(f, "__name__", None), self.when) for f in functions]


def _unloaded(_: Any) -> None:
    raise RuntimeError("a group of rules runs each of its rules, not itself")


class Rules:
    """A plugin's normalizations, derivations and checks, declared as data.

    Each rule is a small function of the draft; the kernel runs a phase's rules in the
    order they are declared (after the plugin's own hook for that phase, if it has one),
    names the rule in the provenance of every value it sets and in every problem it
    reports, and reports a rule that raises without stopping the others. Declare rules
    with decorators (``@rules.derive``), as a table (``Rules(validate=(check_a,
    check_b))``), or in a group that runs only when a condition holds
    (``rules.validate(check_a, check_b, when=uses_feature)``); give the plugin's rules
    to the kernel as ``PluginInfo(rules=rules)``.

    A group under a condition may be named rather than imported:
    ``rules.validate("my_plugin.checks:CHECKS", when=uses_feature)`` runs the rules that
    module lists exactly as if they were given, but imports the module only in a resolve
    where the condition holds (a plugin that is often switched off costs nothing then).

    A feature whose presence changes what another plugin's rule should say takes that
    rule over while it is in use: ``rules.supersede("parallel.check_x", when=uses_fsdp)``
    skips the named rule whenever the condition holds, and the feature's own rules say
    what applies instead. That is how a built-in rule stays free of feature settings.
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
            for function in functions:
                if isinstance(function, str):
                    if when is None or ":" not in function:
                        raise TypeError("a rule must be callable, or name a module's list "
                                        "of rules ('module:NAME') under a condition "
                                        f"(when=), got {function!r}")
                    self.steps[phase].append(RuleStep(_unloaded, function, when, function))
                else:
                    self.steps[phase].append(
                        RuleStep(function, getattr(function, "__name__", None), when))
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
