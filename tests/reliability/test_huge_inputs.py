"""Integers longer than Python will print and nesting deeper than it will walk are problems
wherever they come from: config files, ``--defaults`` (inline or ``@FILE``), the
environment and an encoded heterogeneous config -- never a traceback."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main
from megaplug._errors import MAX_PROBLEM_CHARS
from megaplug.sources._files import MAX_INT_DIGITS

NO_GPU = megaplug.TargetEnvironment(device_capability=None)
HUGE = "9" * 5000


def _cli(*argv: str, **environ: str) -> tuple[int, str]:
    err = io.StringIO()
    with resolve_environment(**environ), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def _resolve_cli(*options: str, **environ: str) -> str:
    code, err = _cli("resolve", "--assume-device-capability", "none", *options, "--",
                     *MINIMAL, **environ)
    assert code == 2 and "Traceback" not in err, err[-2000:]
    return err


CONFIG_FILES = {
    "yaml decimal": ("c.yaml", f"num_layers: {HUGE}\n", "more than 4300 digits"),
    "yaml negative": ("c.yaml", f"seed: -{HUGE}\n", "more than 4300 digits"),
    "yaml hexadecimal": ("c.yaml", f"seed: 0x{'f' * 4000}\n", "more than 4300 digits"),
    "yaml octal": ("c.yaml", f"seed: 0o{'7' * 5000}\n", "more than 4300 digits"),
    "yaml in a list": ("c.yaml", f"moe_layer_freq: [1, {HUGE}]\n", "more than 4300 digits"),
    "yaml explicit tag": ("c.yaml", f"seed: !!int {HUGE}\n", "more than 4300 digits"),
    "yaml as a float": ("c.yaml", f"lr: !!float {HUGE}\n", "more than 4300 digits"),
    "json": ("c.json", f'{{"num_layers": {HUGE}}}', "an integer of 5000 digits"),
    "json nested": ("c.json", f'{{"moe_layer_freq": [[{HUGE}]]}}', "an integer of 5000 digits"),
    "json deep": ("c.json", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "yaml deep": ("c.yaml", "a: " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_FILES))
def test_huge_numbers_and_deep_nesting_in_config_files(tmp_path: Path, name: str) -> None:
    filename, text, expected = CONFIG_FILES[name]
    path = tmp_path / filename
    path.write_text(text)
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL], config_files=[str(path)], environ={}, target=NO_GPU)
    found = [p for p in info.value.problems if str(path) in p.message]
    assert found and expected in found[0].message, info.value
    assert len(found[0].message) < 1000
    assert expected in _resolve_cli("--config", str(path))


def test_an_integer_at_the_limit_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(f"seed: {'1' * MAX_INT_DIGITS}\n")
    kernel, rest = megaplug.load([])
    try:
        kernel.resolve([*rest, *MINIMAL], config_files=[str(path)], environ={}, target=NO_GPU)
    except megaplug.ConfigError as exc:  # a seed that size is refused by its own rule, if any
        assert all("digits" not in p.message for p in exc.problems), exc


DEFAULTS = {
    "huge integer": (json.dumps({"num_layers": 0}).replace("0", HUGE), "5000 digits"),
    "deep nesting": ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    "not json": ("{num_layers: 2}", "not valid JSON"),
    "not an object": ("[1, 2]", "must hold a JSON object, not list"),
}


@pytest.mark.parametrize("form", ["inline", "file"])
@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_huge_numbers_and_deep_nesting_in_defaults(tmp_path: Path, name: str,
                                                   form: str) -> None:
    text, expected = DEFAULTS[name]
    value = text
    if form == "file":
        (tmp_path / "d.json").write_text(text)
        value = f"@{tmp_path / 'd.json'}"
    err = _resolve_cli("--defaults", value)
    assert expected in err and len(err) < 2000, err[:2000]


def test_a_defaults_file_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "d.json").write_bytes(b'{"lr": "caf\xe9"}')
    err = _resolve_cli("--defaults", f"@{tmp_path / 'd.json'}")
    assert "is not UTF-8 text" in err and str(tmp_path / "d.json") in err


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "RANK", "LOCAL_RANK"])
def test_a_huge_integer_in_the_environment(variable: str) -> None:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL], environ={variable: HUGE}, target=NO_GPU)
    assert any(variable in p.flags for p in info.value.problems), info.value
    assert not any("raised" in p.message for p in info.value.problems)
    err = _resolve_cli(**{variable: HUGE})
    assert variable in err
    assert all(len(line) < MAX_PROBLEM_CHARS + 100 for line in err.splitlines())
    assert len(err) < 3 * MAX_PROBLEM_CHARS


@pytest.mark.parametrize("text, expected", [
    (f'{{"hidden_act": "silu", "num_hidden_layers": {HUGE}}}', "5000 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"hidden_act": "silu", "hidden_act": "relu"}', "given more than once"),
])
def test_a_hostile_encoded_heterogeneous_config(text: str, expected: str) -> None:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL, "--heterogeneous-layers-config-encoded-json", text],
                       environ={}, target=NO_GPU)
    found = [p for p in info.value.problems if expected in p.message]
    assert found and found[0].plugin == "model", info.value
    assert not any("raised" in p.message for p in info.value.problems)
