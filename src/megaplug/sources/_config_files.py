"""Reading config files and splitting kernel options out of a command line."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Sequence

    from .._errors import Problem


class ConfigFileError(ValueError):
    """A config file that cannot be read, parsed, or is not a mapping."""


#: Most values (counting every element of every list and mapping) a config file may hold.
#: YAML aliases let a few lines stand for billions of values; each check would walk them.
MAX_VALUES = 1_000_000


def _expanded_size(data: Any, seen: dict[int, int]) -> int:
    """Values in ``data`` with aliases expanded; shared parts are counted once per use."""
    if not isinstance(data, (list, dict)):
        return 1
    key = id(data)
    if key not in seen:
        seen[key] = MAX_VALUES + 1  # a self-referencing alias is too big by definition
        items = data.values() if isinstance(data, dict) else data
        seen[key] = 1 + sum(_expanded_size(item, seen) for item in items)
    return seen[key]


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON mapping of settings.

    JSON is chosen by the ``.json`` suffix; YAML is read with the 1.2 core schema and
    ``yaml.safe_load``'s safety (tags such as ``!!python/object`` are refused, never
    constructed). Only a regular file of sane size is read (see :mod:`megaplug.sources._files`);
    a repeated key, an integer too long to handle, nesting too deep, or (through YAML
    aliases) more than :data:`MAX_VALUES` values are refused.
    """
    from ._files import (UntrustedInputError, not_too_deep, parse_json, parse_yaml,
                         read_text_file)

    where = f"config file {path}"
    try:
        text = read_text_file(path, "config file")
        data = parse_json(text, where) if path.endswith(".json") else parse_yaml(text, where)
        too_big = data is not None and _expanded_size(data, {}) > MAX_VALUES
    except UntrustedInputError as exc:
        raise ConfigFileError(str(exc)) from None
    except RecursionError:
        raise ConfigFileError(f"{where} is nested too deeply") from None
    if data is None:
        return {}
    if too_big:
        raise ConfigFileError(
            f"{where} expands to more than {MAX_VALUES} values (through YAML "
            "anchors and aliases?); a settings file never needs that many")
    try:
        not_too_deep(data, where)
    except UntrustedInputError as exc:
        raise ConfigFileError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"{where} must hold a mapping of settings, not {type(data).__name__}"
        )
    if FORMAT_MARKER in data:
        return _in_another_format(data, where)
    return data


#: The key that marks a file written in another program's config format: an object
#: container (Megatron's ``PretrainConfigContainer``, Megatron-Bridge's ``ConfigContainer``)
#: names its class there. No setting is named so, and a plain settings file never pays for
#: the readers below.
FORMAT_MARKER = "_target_"
#: The entry-point group of config-format readers. Each is ``read(data, where)``: the
#: settings (names and values as a megaplug config file gives them) ``data`` stands for,
#: ``None`` when it is not that format, or ``ValueError`` saying why it cannot be read.
FORMATS_GROUP = "megaplug.config_formats"


def _in_another_format(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data``'s settings, as the first installed reader that knows its format reads them."""
    from ..cache._entry_points import group_entry_points

    readers = group_entry_points(FORMATS_GROUP)
    for entry in readers:
        try:
            settings = entry.load()(data, where)
        except ValueError as exc:
            raise ConfigFileError(str(exc)) from None
        if settings is not None:
            return dict(settings)
    known = ", ".join(entry.name for entry in readers) or "none installed"
    raise ConfigFileError(
        f"{where} is a {data[FORMAT_MARKER]!r} ({FORMAT_MARKER} names its class), a format "
        f"no installed reader knows (readers: {known}; a distribution adds one under the "
        f"{FORMATS_GROUP} entry-point group)")


def take_config_files(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``--config FILE`` / ``--config=FILE`` out of argv: (files, remaining argv)."""
    files: list[str] = []
    rest: list[str] = []
    tokens = iter(argv)
    for token in tokens:
        if token == "--":
            rest += [token, *tokens]
        elif token == "--config" and (path := next(tokens, None)) is not None:
            files.append(os.fspath(path))
        elif token.startswith("--config="):
            files.append(token.split("=", 1)[1])
        else:
            rest.append(token)
    return files, rest



def spelled_twice(data: Mapping[str, Any], where: str, table: Any) -> list[Problem]:
    """A problem for each setting ``data`` gives under more than one spelling
    (``log_interval`` and ``log-interval``): like a repeated key, the last would silently
    win. ``table`` is the flag table that knows the spellings."""
    from .._errors import Problem

    spellings: dict[str, list[str]] = {}
    for key in data:
        spec = table.lookup(str(key))
        if spec is not None:
            spellings.setdefault(spec.dest, []).append(str(key))
    return [Problem(f"{dest} is given {len(keys)} times in {where}, as "
                    f"{', '.join(map(repr, keys[:-1]))} and {keys[-1]!r} (the last would "
                    "silently win)", (table.spelling(dest),), "keep one of them",
                    table.owner(dest))
            for dest, keys in spellings.items() if len(keys) > 1]


def command_line_tokens(items: Any, name: str) -> list[str]:
    """``items`` as a list of str, a path (``pathlib.Path``) as its text; a single string,
    or an item that is neither text nor a path, is a ``TypeError`` naming it."""
    if isinstance(items, (str, bytes)):
        raise TypeError(f"{name} must be a list of str, not one {type(items).__name__} "
                        f"({items[:40]!r}); split it first (shlex.split)")
    tokens = []
    for index, item in enumerate(items):
        if isinstance(item, os.PathLike):
            item = os.fspath(item)
        if not isinstance(item, str):
            raise TypeError(f"{name}[{index}] is {item!r}, a {type(item).__name__}; every "
                            "item must be a str (or a path): write numbers as text")
        tokens.append(item)
    return tokens
