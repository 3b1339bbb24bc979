"""Which settings a rule reads: recorded only once some value has been refused in a resolve,
so that a rule raising on a refused value is known for the knock-on it is (the refusal was
reported; its traceback would only hide it). A valid resolve never pays for it."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Iterator


#: The log's class, made on first use: ``collections.abc`` is no import of a valid resolve.
_LOG_CLASS: list[type] = []


def _log_class() -> type:
    if not _LOG_CLASS:
        from collections.abc import MutableMapping

        class _ReadLog(MutableMapping):  # type: ignore[type-arg]
            """The draft's values, passed through, with every name looked up kept in ``read``."""

            def __init__(self, values: dict[str, Any], read: set[str]) -> None:
                self.values, self.read = values, read

            def __getitem__(self, name: str) -> Any:
                self.read.add(name)
                return self.values[name]

            def __contains__(self, name: object) -> bool:
                if isinstance(name, str):
                    self.read.add(name)
                return name in self.values

            def __setitem__(self, name: str, value: Any) -> None:
                self.values[name] = value

            def __delitem__(self, name: str) -> None:
                del self.values[name]

            def __iter__(self) -> Iterator[str]:
                return iter(self.values)

            def __len__(self) -> int:
                return len(self.values)

        _LOG_CLASS.append(_ReadLog)
    return _LOG_CLASS[0]


def read_log(values: dict[str, Any], read: set[str]) -> Any:
    """``values`` passed through, with every name looked up added to ``read``
    (:meth:`megaplug.Draft.watch_reads` reads a rule's values through it)."""
    return _log_class()(values, read)


def refused_by(plugin: str, problems: Any, table: Any) -> set[str]:
    """The settings ``plugin`` owns that its own ``problems`` name: values it refused."""
    refused = set()
    for problem in problems:
        for flag in problem.flags if problem.plugin == plugin else ():
            spec = table.lookup(flag)
            if spec is not None and spec.plugin == plugin:
                refused.add(spec.dest)
    return refused
