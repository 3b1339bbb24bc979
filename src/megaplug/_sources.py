"""Reading config files and splitting kernel options out of a command line."""

from __future__ import annotations

import json
import os
from typing import Any, Sequence


class ConfigFileError(ValueError):
    """A config file that cannot be read, parsed, or is not a mapping."""


def load_config_file(path: str) -> dict[str, Any]:
    """Read a YAML or JSON mapping of settings.

    YAML goes through ``yaml.safe_load``: tags such as ``!!python/object`` are refused,
    never constructed. JSON is chosen by the ``.json`` suffix.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigFileError(f"cannot read config file {path}: {exc.strerror or exc}") from None
    if path.endswith(".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigFileError(f"config file {path} is not valid JSON: {exc}") from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.constructor.ConstructorError as exc:
            raise ConfigFileError(
                f"config file {path} uses a YAML tag megaplug will not construct "
                f"({exc.problem}); only plain values, lists and mappings are allowed"
            ) from None
        except yaml.YAMLError as exc:
            raise ConfigFileError(f"config file {path} is not valid YAML: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"config file {path} must hold a mapping of settings, not {type(data).__name__}"
        )
    return data


def take_config_files(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """Split ``--config FILE`` / ``--config=FILE`` out of argv: (files, remaining argv)."""
    files: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        if token == "--":
            rest.extend(argv[index:])
            break
        if token == "--config":
            if index + 1 < len(argv):
                files.append(os.fspath(argv[index + 1]))
                index += 2
                continue
        elif token.startswith("--config="):
            files.append(token.split("=", 1)[1])
            index += 1
            continue
        rest.append(token)
        index += 1
    return files, rest
