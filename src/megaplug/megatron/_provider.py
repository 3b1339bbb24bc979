"""Megatron's ``extra_args_provider``: a function that adds flags to the parser.

Real providers use the whole of argparse -- groups, any action class, ``set_defaults``,
a dest shared with one of Megatron's flags, and ``parser._actions`` to see what exists --
so the provider receives a real :class:`argparse.ArgumentParser` holding every flag of the
active plugins. What it adds is then parsed by argparse itself, on the command line's
tokens, before megaplug's kernel parses the rest; the values join the resolved namespace
with argparse's semantics (the first declaration of a dest gives its default).
"""

from __future__ import annotations

import argparse

from .._config import Provenance
from .._errors import Problem
from ._arguments import add_megatron_arguments

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

PROVIDER = "extra_args_provider"
_MISSING = object()


class ProviderArgumentError(Exception):
    """argparse refused the provider's flags on the command line (a bad value)."""


class ProviderParser(argparse.ArgumentParser):
    """An argparse parser whose errors are reported as problems rather than exits."""

    def error(self, message: str) -> Any:  # argparse's hook; never returns
        raise ProviderArgumentError(message)


class ProviderFlags:
    """What an extra_args_provider added to the parser, and how to apply it."""

    def __init__(self, provider: Callable[[Any], Any]) -> None:
        parser = ProviderParser(description="Megatron-LM Arguments", allow_abbrev=False)
        add_megatron_arguments(parser)
        known = len(parser._actions)
        defaults_before = dict(parser._defaults)
        returned = provider(parser)
        if isinstance(returned, argparse.ArgumentParser):
            parser = returned
        #: Megatron's parser with the provider's flags: what ``--help`` prints.
        self.parser = parser
        self.actions: list[argparse.Action] = list(parser._actions[known:])
        #: ``set_defaults`` calls of the provider, for settings of any owner.
        self.defaults = {dest: value for dest, value in parser._defaults.items()
                         if defaults_before.get(dest, _MISSING) is not value}
        self._namespace: argparse.Namespace | None = None
        self._given: set[str] = set()

    @property
    def dests(self) -> frozenset[str]:
        """The settings the provider's flags set."""
        return frozenset(action.dest for action in self.actions
                         if action.dest is not argparse.SUPPRESS)

    @property
    def settings(self) -> frozenset[str]:
        """Every setting the provider declares: its flags' and its ``set_defaults``'."""
        return self.dests | frozenset(self.defaults)

    def parse(self, tokens: Sequence[str]) -> tuple[argparse.Namespace, set[str], list[str]]:
        """Parse the provider's flags out of ``tokens``.

        Returns their namespace, the dests given on the command line, and the tokens left
        for megaplug's kernel. Raises :class:`ProviderArgumentError` for a bad value.
        """
        parser = ProviderParser(allow_abbrev=False, add_help=False)
        for action in self.actions:
            parser._add_action(action)
        parser.set_defaults(**{dest: value for dest, value in self.defaults.items()
                               if dest in self.dests})
        namespace, rest = parser.parse_known_args(list(tokens))
        consumed = set(tokens) - set(rest)
        given = {action.dest for action in self.actions
                 if any(token in action.option_strings
                        or token.split("=", 1)[0] in action.option_strings
                        for token in consumed)}
        return namespace, given, rest

    def take(self, tokens: Sequence[str], problems: list[Problem]) -> list[str]:
        """Parse the provider's flags out of ``tokens``; return the tokens left for megaplug.

        A bad value becomes a problem; the provider's flags are then left out.
        """
        try:
            self._namespace, self._given, rest = self.parse(tokens)
        except ProviderArgumentError as exc:
            problems.append(Problem(f"command line: {exc}", plugin=PROVIDER,
                                    hint="check the flags the entry script adds"))
            self._namespace, self._given = None, set()
            return self._without_own_flags(tokens)
        return rest

    def _without_own_flags(self, tokens: Sequence[str]) -> list[str]:
        """``tokens`` less the provider's flags and their values, split as megaplug splits
        a command line: a bad value is the provider's one problem, not also a stray token."""
        from .._options import spec_from_argparse
        from ..sources._command_line import split

        options: dict[str, Any] = {}
        for action in self.actions:
            for option in action.option_strings:
                options[option] = spec_from_argparse(
                    (option,), {"nargs": action.nargs} if action.nargs != 0 else
                    {"action": "store_true"}, PROVIDER)
        taken = {index for occurrence in split(tokens, options).occurrences
                 for index in range(occurrence.start, occurrence.end)}
        return [token for index, token in enumerate(tokens) if index not in taken]

    def merge(self, values: dict[str, Any], provenance: dict[str, Provenance],
              owner: Callable[[str], str | None]) -> None:
        """Put what :meth:`take` parsed into megaplug's parsed ``values``, with argparse's
        rules: a flag sharing a dest with a plugin's flag counts only when given (the first
        declaration's default stands), and ``set_defaults`` replaces a default."""
        if self._namespace is None:
            return
        for dest in self.dests:
            if owner(dest) is not None and dest not in self._given:
                continue
            value = getattr(self._namespace, dest, None)
            source = "command-line" if dest in self._given else "default"
            provenance[dest] = Provenance(source, "", PROVIDER, previous=provenance.get(dest),
                                          value=value)
            values[dest] = value
        for dest, default in self.defaults.items():
            record = provenance.get(dest)
            if dest in self.dests or (record is not None and record.source != "default"):
                continue
            values[dest] = default
            provenance[dest] = Provenance("default", "set_defaults of the extra_args_provider",
                                          PROVIDER, previous=record, value=default)
