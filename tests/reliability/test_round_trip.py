"""Given settings dumped to a config file reproduce the configuration exactly.

For every shared parity case Megatron accepted: resolve, dump ``Resolved.given_values()``
(values through ``megaplug.values._encoding.encode``: enums as ``Class.member``, dtypes as
``torch.x``) to YAML and to JSON, resolve again from only that file with the same
environment, caller defaults and target, and compare every value. The command line does
the same with ``megaplug resolve --given --format yaml|json`` and ``--config FILE``.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from reliability_support import ok_cases, resolve_environment, target_for, third_party_blocks

import megaplug
from megaplug.cli import main
from megaplug.values._encoding import encode


@pytest.fixture(autouse=True)
def megatrons_acceptance(monkeypatch):
    """These cases are judged by Megatron's validate_args: pre-flight (on in the CLI) off."""
    monkeypatch.setenv("MEGAPLUG_PREFLIGHT", "0")


CASES = ok_cases()
FORMATS = ("yaml", "json")


def _kernel() -> megaplug.Kernel:
    return megaplug.load(third_party_blocks())[0]


def _resolve(case: dict[str, Any], argv: list[str], files: list[str] = ()) -> megaplug.Resolved:
    return _kernel().resolve(argv, config_files=list(files), environ=dict(case.get("env") or {}),
                             defaults=case.get("args_defaults") or {}, target=target_for(case))


def _encoded(resolved: megaplug.Resolved) -> dict[str, Any]:
    return {k: encode(resolved[k]) for k in sorted(resolved)}


def _write(path: Path, settings: dict[str, Any], form: str) -> None:
    encoded = {k: encode(v) for k, v in settings.items()}
    if form == "yaml":
        path.write_text(yaml.safe_dump(encoded, sort_keys=True))
    else:
        path.write_text(json.dumps(encoded, indent=1, sort_keys=True))


@pytest.mark.parametrize("form", FORMATS)
def test_every_accepted_case_round_trips_through_a_file(tmp_path: Path, form: str) -> None:
    written = 0
    for name, case in CASES:
        first = _resolve(case, case["argv"])
        path = tmp_path / f"{name}.{form}"
        _write(path, first.given_values(), form)
        again = _resolve(case, [], [str(path)])
        before, after = _encoded(first), _encoded(again)
        differing = sorted(k for k in before.keys() | after.keys()
                           if before.get(k, "<missing>") != after.get(k, "<missing>"))
        assert not differing, (name, [(k, before.get(k), after.get(k)) for k in differing[:5]])
        written += 1
    assert written == len(CASES) >= 40


def _cli(case: dict[str, Any], *argv: str) -> tuple[int, str, str]:
    target: list[str] = []
    assume = case.get("assume") or {}
    for package, version in (assume.get("packages") or {}).items():
        target += ["--assume", f"{package}={version if version is not None else 'none'}"]
    capability = assume.get("device_capability")
    target += ["--assume-device-capability",
               ".".join(map(str, capability)) if capability else "none"]
    if case.get("args_defaults"):
        target += ["--defaults", json.dumps(case["args_defaults"])]
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment(**(case.get("env") or {})), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(["resolve", *target, *argv])
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("form", FORMATS)
def test_the_cli_given_dump_round_trips(tmp_path: Path, form: str) -> None:
    blocks = third_party_blocks()
    for name, case in CASES:
        code, values, err = _cli(case, "--", *blocks, *case["argv"])
        assert code == 0, (name, err)
        code, dumped, err = _cli(case, "--given", "--format", form, "--", *blocks, *case["argv"])
        assert code == 0, (name, err)
        path = tmp_path / f"{name}.{form}"
        path.write_text(dumped)
        code, again, err = _cli(case, "--config", str(path), "--", *blocks)
        assert code == 0, (name, err)
        assert json.loads(again) == json.loads(values), name


def test_given_holds_what_was_given_not_what_was_derived() -> None:
    name, case = next((n, c) for n, c in CASES if "--num-layers" in c["argv"])
    given = _resolve(case, case["argv"]).given_values()
    assert "num_layers" in given
    assert "data_parallel_size" not in given  # computed, never given
    assert all(not k.startswith("_") for k in given)
