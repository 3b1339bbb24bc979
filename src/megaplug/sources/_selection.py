"""The plugin selection a user gives: ``MEGAPLUG_PLUGINS``, ``MEGAPLUG_DISABLE``,
``MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD`` and the ``-p NAME`` / ``-p no:NAME`` / ``--no-autoload``
tokens of a command line, read before any plugin is imported. A yes/no variable
(``sources._switches``) holding neither is one of its problems."""

from __future__ import annotations

import os
import re

from .._record import MutableRecord
from ._switches import SWITCH_HINT, SwitchError, switch, switch_problems

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterable, Sequence


class PluginSelection(MutableRecord):
    """Which plugins to load beyond the built-ins, and which to block.

    ``MEGAPLUG_PLUGINS`` / ``MEGAPLUG_DISABLE`` hold comma-separated names, ``-p NAME`` /
    ``-p no:NAME`` one each; a name (an entry point's or a module's) is matched exactly.
    An entry that is not a name (``*``, ``moe;mla``) is kept in ``problems`` as a
    (message, hint), never dropped silently.
    """

    __slots__ = ("load", "block", "autoload", "problems")

    def __init__(self, load: Iterable[str] = (), block: Iterable[str] = (),
                 autoload: bool = True) -> None:
        self.load: list[str] = list(load)
        self.block: set[str] = set(block)
        self.autoload = autoload
        self.problems: list[tuple[str, str]] = []

    @classmethod
    def from_environment(cls, environ: Any = None) -> PluginSelection:
        env = os.environ if environ is None else environ
        selection = cls()
        selection.load = selection._names(env, "MEGAPLUG_PLUGINS")
        selection.block = set(selection._names(env, "MEGAPLUG_DISABLE"))
        selection.autoload = not selection._switch(env, "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD")
        for problem in switch_problems(env):  # the other yes/no variables, once, here
            if not problem.startswith("MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD="):
                selection.problems.append((problem, SWITCH_HINT))
        return selection

    def _switch(self, env: Any, variable: str) -> bool:
        """A yes/no variable (unset: no); a value that is neither is a problem, read as no."""
        try:
            return switch(variable, False, env)
        except SwitchError as error:
            self.problems.append((str(error), SWITCH_HINT))
            return False

    def _names(self, env: Any, variable: str) -> list[str]:
        """The names in a comma-separated variable (empty entries are skipped)."""
        entries = (entry.strip() for entry in env.get(variable, "").split(","))
        return [entry for entry in entries if entry and self._checked(entry, variable)]

    def _checked(self, entry: str, where: str) -> bool:
        """Whether ``entry`` is a plugin name; if not, why not goes to ``problems``."""
        if re.match(_PLUGIN_NAME, entry):
            return True
        shown = f"{where} entry {entry!r}" if where.isupper() else f"{where}{entry}"
        if entry.startswith("no:") and where == "MEGAPLUG_DISABLE":
            reason, hint = ("MEGAPLUG_DISABLE takes plain names (everything it lists is "
                            "blocked)", f"write MEGAPLUG_DISABLE={entry[3:]}")
        elif entry.startswith("no:"):
            reason, hint = "not a plugin name", f"block a plugin with -p no:{entry[3:]}"
        elif "*" in entry or "?" in entry:
            reason, hint = ("a pattern; plugins are named one by one",
                            "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD=1 (or --no-autoload) leaves out "
                            "every installed plugin; megaplug list names them")
        else:
            reason, hint = ("not a plugin name", "separate names with commas, e.g. "
                            "MEGAPLUG_DISABLE=moe,mla; megaplug list names the plugins")
        self.problems.append((f"{shown}: {reason}", hint))
        return False

    def take_from_argv(self, argv: Sequence[str]) -> list[str]:
        """Consume ``-p NAME`` / ``-p no:NAME`` / ``--no-autoload`` tokens; return the rest."""
        rest: list[str] = []
        tokens = iter(argv)
        for token in tokens:
            if token == "--":
                rest += [token, *tokens]
            elif token.startswith("-p") and not token.startswith("--"):
                name = token[2:].lstrip("=") if len(token) > 2 else next(tokens, None)
                if name is None:
                    rest.append(token)
                else:
                    self._apply(name)
            elif token == "--no-autoload":
                self.autoload = False
            else:
                rest.append(token)
        return rest

    def _apply(self, name: str) -> None:
        if name.startswith("no:"):
            if self._checked(name[3:], "-p no:"):
                self.block.add(name[3:])
        elif self._checked(name, "-p "):
            self.load.append(name)


#: A plugin name: an entry point's name (``[\w.-]+`` by the entry-point spec) or a module's.
_PLUGIN_NAME = r"^[\w.-]+$"  # compiled when first used


#: The feature-plugin distributions this project ships (``plugins/megaplug-*``; a test holds
#: the list to that directory). With the built-ins they are loaded, ordered and declared
#: before any other plugin, so a third party's plugin that claims one of their names or
#: flags, or contradicts their order, is the one refused: a newcomer cannot break them.
SHIPPED_DISTRIBUTIONS = frozenset({
    "megaplug-bridge", "megaplug-distillation", "megaplug-fsdp", "megaplug-gtp",
    "megaplug-inference", "megaplug-kitchen", "megaplug-memory", "megaplug-mla",
    "megaplug-moe", "megaplug-preflight", "megaplug-rl"})


def is_shipped(record: Any) -> bool:
    """Whether a plugin (its record) is a built-in or one megaplug ships: never the one
    refused when another plugin claims its name or flags, or contradicts its order."""
    return record.source == "builtin" or record.distribution in SHIPPED_DISTRIBUTIONS


def shipped_first(entry_points: Iterable[Any]) -> list[Any]:
    """The entry points, the shipped distributions' first (each group in its own order)."""
    return sorted(entry_points, key=lambda entry: entry.distribution not in
                  SHIPPED_DISTRIBUTIONS)


def is_plugin_name(name: Any) -> bool:
    """Whether ``name`` can be written after ``-p`` / ``-p no:`` and in ``MEGAPLUG_DISABLE``."""
    return isinstance(name, str) and re.fullmatch(_PLUGIN_NAME, name) is not None


def name_refusal(name: str, holder: str | None, own_name: str) -> str:
    """Why a plugin is refused its ``name``: another plugin (``holder``, described) has it,
    or it cannot be written after ``-p no:``."""
    if holder is None:
        return (f"its name {name!r} cannot be blocked with -p no:NAME (a plugin name is "
                "letters, digits and _ . - only); rename it in its PluginInfo")
    return (f"its PluginInfo names it {name!r}, which plugin {holder} already has; rename "
            f"it in its PluginInfo (block it with -p no:{own_name})")


#: Option strings megaplug takes out of a command line before any plugin sees it.
_READ_BY_MEGAPLUG = {"--config": "config files", "--no-autoload": "the plugin selection",
                 "-h": "help", "--help": "help", "--": "the end of the options"}


def read_by_megaplug(option: str) -> str | None:
    """What megaplug reads ``option`` as, if it is one of its own, so no plugin may declare
    it: ``-p`` and anything ``-p`` begins (``-pNAME`` is ``-p NAME``) select plugins."""
    if option.startswith("-p") and not option.startswith("--"):
        return "the plugin selection: -p NAME, -pNAME"
    return _READ_BY_MEGAPLUG.get(option.partition("=")[0])
