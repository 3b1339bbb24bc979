"""flags -> export -> import -> resolve: the same namespace (issue 37's import judgement).

For every configuration ``test_mlm_config.py`` and ``test_bridge_export.py`` export (the
null-tokenizer launches, both targets), the original flags are resolved by megaplug for
Megatron 0.19.2, exported, imported back to flags for 0.19.2 (``import_config``, as
``megaplug import ... --to 0.19.2`` runs it), and those flags resolved again. The two
namespaces are compared key by key, value and type. The flags export names as having no
home in the container are given again, as a user resuming from the file would (the
existing round trips give the dataset flags and a layer spec again the same way), except
those whose setting the imported flags already reproduce (an alias such as
--encoder-num-layers, refused if given twice); the settings a container cannot carry back
(``ONE_WAY_SETTINGS``, documented in docs/interop.md) are left out of the comparison where
the flag that makes them is on. Any other difference fails, naming the key and both values.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import warnings
from typing import Any

import pytest

import reference
from mlm_reference import launch_of, megaplug_export, megatron_yaml, tally
from test_bridge_export import _comparable, _export, _given_again
from test_bridge_export import _case as _bridge_case
from test_mlm_config import CASES, _accepted, _case_id

FIGURE = "{target}: flags -> export -> import -> resolve: the same namespace"
_ABSENT = "<absent>"


def _resolved(case: dict[str, Any], argv: list[str] | None = None,
              partial: bool = False) -> dict[str, Any]:
    """megaplug's namespace for the case's launch (or ``argv`` in its place), as export
    resolves it; with ``partial``, as far as a refused resolve gets."""
    from megaplug.megatron import ConfigError, parse_and_validate_args

    launch = launch_of(case, argv)
    quiet = io.StringIO()
    with reference.targeting(case), contextlib.redirect_stdout(quiet), \
            contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return vars(parse_and_validate_args(
                argv=launch["argv"], environ=launch["environ"],
                args_defaults=launch["args_defaults"], target=launch["target"],
                torch_types=True, register=False, preflight=False, print_arguments=False))
        except ConfigError as exc:
            if not partial:
                raise
            return {} if exc.partial is None else exc.partial.to_dict()


def _typed(value: Any) -> Any:
    """A value compared with its type (``1`` is not ``1.0``), lists item by item."""
    if isinstance(value, (list, tuple)):
        return type(value).__name__, tuple(_typed(item) for item in value)
    return type(value).__name__, _comparable(value)


def _exported(target: str, path: Any) -> tuple[dict[str, Any], Any]:
    """The case as the target's export test runs it, and megaplug's export of it; skipped
    where that test skips it (refused, and counted, there)."""
    if target == "mlm-config":
        case = _accepted(path, vocabulary=True)
        try:
            megatron_yaml(case)
            return case, megaplug_export(case)
        except (SystemExit, AssertionError, ValueError):
            pytest.skip("refused (counted by test_mlm_config.py)")
    case = _bridge_case(path)
    try:
        reference.megatron_args(case)
        return case, _export(case)
    except (SystemExit, AssertionError, ValueError):
        pytest.skip("refused (counted by test_bridge_export.py)")


def _imported(target: str, text: str, case: dict[str, Any]) -> list[str]:
    """The flags ``import mlm-config|bridge FILE --to 0.19.2`` gives for ``text``."""
    from megaplug import TargetEnvironment
    from megaplug_bridge import bridge, mlm_config

    module = mlm_config if target == "mlm-config" else bridge
    with tempfile.TemporaryDirectory() as directory:
        written = os.path.join(directory, "config.yaml")
        with open(written, "w", encoding="utf-8") as handle:
            handle.write(text)
        return module.import_config(written, [], TargetEnvironment(
            packages={"megatron_core": "0.19.2"}), case.get("env") or {}).argv


@pytest.mark.parametrize("target", ["mlm-config", "bridge"])
@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_flags_export_import_resolve_is_the_same_namespace(path: Any, target: str) -> None:
    from megaplug_bridge._container import ONE_WAY_SETTINGS

    case, exported = _exported(target, path)
    original = _resolved(case)
    one_way = {key for given, changed in ONE_WAY_SETTINGS.items() if original.get(given)
               for key in changed}
    imported = _imported(target, exported.text, case)
    # the flags with no home, less the one-way ones and those whose setting the imported
    # flags reproduce anyway (an alias such as --encoder-num-layers: given twice, refused)
    alone = _resolved(case, imported, partial=True)
    homeless = {row["dest"] for row in exported.not_exported
                if row.get("dest") and row["dest"] not in one_way
                and _typed(alone.get(row["dest"], _ABSENT))
                != _typed(original.get(row["dest"], _ABSENT))}
    again = _resolved(case, [*imported, *_given_again(case["argv"], homeless)])
    differing = {key: (original.get(key, _ABSENT), again.get(key, _ABSENT))
                 for key in sorted(original.keys() | again.keys()) if key not in one_way
                 and _typed(original.get(key, _ABSENT)) != _typed(again.get(key, _ABSENT))}
    tally(FIGURE.format(target=target), not differing)
    assert {key: [repr(value) for value in values] for key, values in differing.items()} == {}
