"""Reading config files and splitting kernel options out of a command line."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence


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

    YAML goes through ``yaml.safe_load``: tags such as ``!!python/object`` are refused,
    never constructed. JSON is chosen by the ``.json`` suffix. Files nested too deeply or
    expanding (through YAML aliases) to more than :data:`MAX_VALUES` values are refused.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None
    try:
        data = _parse_json(path, text) if path.endswith(".json") else _parse_yaml(path, text)
        too_big = data is not None and _expanded_size(data, {}) > MAX_VALUES
    except RecursionError:
        raise ConfigFileError(f"config file {path} is nested too deeply") from None
    if data is None:
        return {}
    if too_big:
        raise ConfigFileError(
            f"config file {path} expands to more than {MAX_VALUES} values (through YAML "
            "anchors and aliases?); a settings file never needs that many")
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"config file {path} must hold a mapping of settings, not {type(data).__name__}"
        )
    return data


def _parse_json(path: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(f"config file {path} is not valid JSON: {exc}") from None


def _parse_yaml(path: str, text: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.constructor.ConstructorError as exc:
        raise ConfigFileError(
            f"config file {path} uses a YAML tag megaplug will not construct "
            f"({exc.problem}); only plain values, lists and mappings are allowed"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"config file {path} is not valid YAML: {exc}") from None


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
