"""What megaplug prints, tools can read: strict JSON, YAML that reloads to the same values.

A float setting takes finite numbers only, from every source; ``clip_grad`` alone takes
``inf`` (measure the gradient norm, never clip), written as the text ``"inf"`` in JSON and
YAML, which megaplug reads back as the same float.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main
from megaplug._errors import Problem
from megaplug.sources._config_files import load_config_file
from megaplug.values._encoding import encode, to_json
from megaplug.values._types import float_or_infinity
from megaplug.sources._files import to_yaml

_KERNEL, _ = megaplug.load([])
FLOAT_SETTINGS = sorted(spec.dest for spec in _KERNEL.table
                        if spec.kind != "computed" and spec.type is float)
NON_FINITE_TEXT = ("inf", "-inf", "nan", "Infinity", "1e400", "-1e999", "NaN")


def strict_json(text: str) -> Any:
    """``json.loads`` as JSON.parse and jq read it: no NaN, Infinity or -Infinity."""
    def refuse(constant: str) -> Any:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def cli(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment("1", **(environ or {})), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


# -- which settings take what -------------------------------------------------------------

def test_the_float_settings_are_the_ones_documented() -> None:
    """docs/reliability.md names the rule by count: a new float setting is finite too."""
    assert len(FLOAT_SETTINGS) >= 100
    infinite = sorted(spec.dest for spec in _KERNEL.table if spec.type is float_or_infinity)
    assert infinite == ["clip_grad"]


@pytest.mark.parametrize("text", NON_FINITE_TEXT)
def test_every_float_setting_refuses_a_non_finite_number(text: str) -> None:
    for dest in FLOAT_SETTINGS:
        spec = _KERNEL.table.by_dest[dest][0]
        problem = _KERNEL.convert(spec, text)
        assert isinstance(problem, Problem), (dest, problem)
        assert "is not a finite number" in problem.message
        assert problem.hint == f"give {spec.primary} a finite float value"


@pytest.mark.parametrize("loaded", [math.inf, -math.inf, math.nan, 10**400])
def test_a_loaded_non_finite_or_huge_number_is_refused_too(loaded: Any) -> None:
    """As YAML ``.inf`` / ``.nan``, JSON ``Infinity`` or a 400-digit integer load."""
    problem = _KERNEL.convert("lr", loaded, source="config-file", detail="c.yaml")
    assert isinstance(problem, Problem)
    assert problem.message.startswith("--lr in config file c.yaml: ")


@pytest.mark.parametrize(("given", "expected"), [("inf", math.inf), ("Infinity", math.inf),
                                                 ("1e400", math.inf), ("0.5", 0.5)])
def test_clip_grad_takes_infinity(given: str, expected: float) -> None:
    assert _KERNEL.convert("clip_grad", given) == expected
    assert _KERNEL.convert("clip_grad", float(given), source="config-file") == expected


@pytest.mark.parametrize("given", ["nan", "-inf", "NaN", "x"])
def test_clip_grad_refuses_nan_and_minus_infinity(given: str) -> None:
    problem = _KERNEL.convert("clip_grad", given)
    assert isinstance(problem, Problem) and problem.flags == ("--clip-grad",)


def test_every_source_names_itself_when_refusing_infinity(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("lr: .inf\n")
    code, _, err = cli("resolve", "--defaults", '{"init_method_std": NaN}', "--", *MINIMAL,
                       "--config", str(config), "--weight-decay=-inf")
    assert code == 2 and "Traceback" not in err
    assert f"--lr in config file {config}: inf is not a finite number" in err
    assert "--weight-decay: '-inf' is not a finite number" in err
    assert "init_method_std in the caller's defaults: nan is not a finite number" in err


# -- strict JSON from every command --------------------------------------------------------

ARGV = [*MINIMAL, "--clip-grad", "inf"]


@pytest.mark.parametrize("extra", [[], ["--given"], ["--provenance"]])
def test_resolve_prints_strict_json(extra: list[str]) -> None:
    code, out, err = cli("resolve", *extra, "--", *ARGV)
    assert code == 0, err
    data = strict_json(out)
    if extra != ["--provenance"]:
        assert data["clip_grad"] == "inf"
    else:
        assert data["clip_grad"]["source"] == "command-line"


def test_explain_list_flags_schema_and_diff_print_strict_json(tmp_path: Path) -> None:
    code, out, _ = cli("explain", "clip_grad", "--", *ARGV)
    assert code == 0 and 'value:     "inf"' in out
    for command in (["list", "--json"], ["flags", "--json"], ["schema"]):
        code, out, _ = cli(*command)
        assert code == 0 and strict_json(out), command
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    first.write_text("clip_grad: .inf\n")
    second.write_text("clip_grad: 1.0\n")
    code, out, err = cli("diff", "--json", str(first), str(second), "--", *MINIMAL)
    assert code == 0, err
    differences = {d["setting"]: d for d in strict_json(out)["differences"]}
    assert differences["clip_grad"]["a"]["value"] == "inf"
    assert differences["clip_grad"]["b"]["value"] == 1.0


def test_a_non_finite_value_a_plugin_derives_is_written_as_text() -> None:
    """encode and the writers never let NaN or Infinity through, whoever made the value."""
    values = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2, math.nan)}
    assert encode(values) == {"a": "nan", "b": ["inf", "-inf", 1.5], "c": [2, "nan"]}
    assert strict_json(to_json(values)) == {"a": "nan", "b": ["inf", "-inf", 1.5],
                                            "c": [2, "nan"]}
    assert "nan" in to_yaml(values) and ".nan" not in to_yaml(values)


# -- YAML and JSON reload to the same values -----------------------------------------------

@pytest.mark.parametrize("form", ["yaml", "json"])
@pytest.mark.parametrize("clip", ["inf", "1e400", "0.25"])
def test_given_output_reloads_to_the_same_configuration(tmp_path: Path, form: str,
                                                         clip: str) -> None:
    code, full, _ = cli("resolve", "--", *MINIMAL, "--clip-grad", clip)
    assert code == 0
    code, given, _ = cli("resolve", "--given", "--format", form, "--", *MINIMAL,
                         "--clip-grad", clip)
    assert code == 0
    path = tmp_path / f"given.{form}"
    path.write_text(given)
    assert load_config_file(str(path))["clip_grad"] in ("inf", 0.25)
    code, again, err = cli("resolve", "--config", str(path))
    assert code == 0, err
    assert strict_json(again) == strict_json(full)


TEXT_THAT_LOOKS_LIKE_SOMETHING_ELSE = [
    "1e3", "010", "0o17", "0x1F", ".5", "+1", "1_000", "1:20", "true", "True", "yes", "no",
    "on", "null", "~", "", "inf", ".inf", "-.INF", ".nan", "nan", "-5", "12e", "日本"]


@pytest.mark.parametrize("text", TEXT_THAT_LOOKS_LIKE_SOMETHING_ELSE)
def test_yaml_output_keeps_text_text(tmp_path: Path, text: str) -> None:
    """Under YAML 1.1 (PyYAML) and 1.2 (yq, ruamel) alike, the text stays the same text."""
    import yaml

    written = to_yaml({"tokenizer_model": text, "split": [text]})
    path = tmp_path / "out.yaml"
    path.write_text(written)
    assert load_config_file(str(path)) == {"tokenizer_model": text, "split": [text]}
    line = next(line for line in written.splitlines() if line.startswith("tokenizer_model:"))
    scalar = line.partition(": ")[2]
    assert yaml.safe_load(scalar) == text  # PyYAML's own (YAML 1.1) reading agrees
    plain_in_yaml12 = scalar[:1] not in ("'", '"') and (
        text in ("", "~") or text.lower() in ("true", "false", "null")
        or _is_yaml12_number(text))
    assert not plain_in_yaml12, written


def _is_yaml12_number(text: str) -> bool:
    import re

    return re.fullmatch(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)"
                        r"([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)", text) \
        is not None
