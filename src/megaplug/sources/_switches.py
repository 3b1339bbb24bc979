"""megaplug's yes/no environment variables, read one way.

``1``, ``true``, ``yes``, ``on`` mean yes; ``0``, ``false``, ``no``, ``off`` mean no (in any
case, around any spaces); unset or empty means the switch's default. Anything else is a
mistake named with its variable -- never read as one or the other: before this reader,
``MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD=false`` turned autoloading *off* and
``MEGAPLUG_PREFLIGHT=`` (empty) turned the checks *on*.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping

_YES = frozenset({"1", "true", "yes", "on"})
_NO = frozenset({"0", "false", "no", "off"})

#: Every yes/no variable megaplug reads, with its meaning when unset (the pre-flight
#: switch's depends on the caller: on for the ``megaplug`` command, off for the facade).
SWITCHES = {
    "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": False,
    "MEGAPLUG_NO_CACHE": False,
    "MEGAPLUG_PREFLIGHT": None,
}


class SwitchError(ValueError):
    """A yes/no variable holds something else; the message names the variable."""


def switch(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """The yes/no variable ``name`` of ``environ`` (the process's by default); ``default``
    when it is unset or empty. Raises :class:`SwitchError` for any other value."""
    value = (os.environ if environ is None else environ).get(name)
    if value is None:
        return default
    word = value.strip().lower()
    if not word:
        return default
    if word in _YES:
        return True
    if word in _NO:
        return False
    raise SwitchError(f"{name}={value!r} is neither yes nor no")


#: How to set any switch, the hint of every :class:`SwitchError`.
SWITCH_HINT = "use 1, true, yes or on; 0, false, no or off; or leave it unset"


def switch_problems(environ: Mapping[str, str] | None = None) -> list[str]:
    """The message of every yes/no variable in ``environ`` whose value is neither."""
    problems = []
    for name in SWITCHES:
        try:
            switch(name, False, environ)
        except SwitchError as error:
            problems.append(str(error))
    return problems
