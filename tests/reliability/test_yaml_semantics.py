"""Config files read numbers and booleans as YAML 1.2 (what yq and Megatron's launchers
read), and a key given twice -- in YAML, JSON or ``--defaults`` -- is a problem, never a
silent last-one-wins."""

from __future__ import annotations

import contextlib
import io
import math
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main
from megaplug.sources._files import UntrustedInputError, parse_json, parse_yaml

NO_GPU = megaplug.TargetEnvironment(device_capability=None)

#: plain scalar -> the value YAML 1.2's core schema gives it (1.1 gave the comment's)
CORE_SCHEMA = {
    "010": 10,            # 1.1: 8 (octal)
    "0o10": 8,            # 1.1: the text '0o10'
    "0x1F": 31,
    "-0": 0,
    "+5": 5,
    "1:20": "1:20",       # 1.1: 80 (sexagesimal)
    "1_000": "1_000",     # 1.1: 1000
    "0b101": "0b101",     # 1.1: 5
    "yes": "yes", "no": "no", "on": "on", "off": "off", "y": "y", "n": "n",  # 1.1: booleans
    "true": True, "True": True, "TRUE": True, "false": False, "FALSE": False,
    "1e3": 1000.0, "1.": 1.0, ".5": 0.5, "-1.5e-4": -1.5e-4,
    ".inf": math.inf, "-.Inf": -math.inf, "+.INF": math.inf,
    "~": None, "null": None, "NULL": None, "": None,
    "2001-12-14": "2001-12-14",  # 1.1: a date
    "'010'": "010",
    "=": "=",
}


@pytest.mark.parametrize("text", sorted(CORE_SCHEMA))
def test_plain_scalars_follow_the_yaml_1_2_core_schema(text: str) -> None:
    value = parse_yaml(f"key: {text}\n", "test")["key"]
    expected = CORE_SCHEMA[text]
    assert value == expected and type(value) is type(expected)


def test_nan_is_a_float() -> None:
    assert math.isnan(parse_yaml("key: .NaN", "test")["key"])


def _problems(files: list[str], argv: tuple[str, ...] = ()) -> list[str]:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *argv], config_files=files, environ={}, target=NO_GPU)
    return [p.message for p in info.value.problems]


def test_a_leading_zero_is_decimal_and_a_colon_is_text_in_a_resolve(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("num_layers: 010\nhidden_size: 0o100\n")
    kernel, rest = megaplug.load([])
    drop = {"--num-layers", "--hidden-size"}
    kept = [t for i, t in enumerate(MINIMAL) if t not in drop and MINIMAL[i - 1] not in drop]
    resolved = kernel.resolve([*rest, *kept], config_files=[str(config)], environ={},
                              target=NO_GPU)
    assert resolved.num_layers == 10 and resolved.hidden_size == 64
    config.write_text("seed: 1:20\n")
    messages = _problems([str(config)], tuple(MINIMAL))
    assert any("--seed" in m and "'1:20'" in m for m in messages), messages


def test_yes_is_not_a_boolean(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("bf16: yes\n")
    messages = _problems([str(config)], tuple(MINIMAL))
    assert any("--bf16" in m for m in messages), messages


@pytest.mark.parametrize("text, message", [
    ("a: !!int abc", "'abc' on line 1 is not an integer"),
    ("a: !!int 1:20", "not an integer"),
    ("a: !!bool yes", "'yes' on line 1 is not a boolean"),
    ("a: !!float x", "'x' on line 1 is not a float"),
    ("a: !!timestamp x", "line 1 is tagged !!timestamp"),
    ("a: !!timestamp 2001-13-45", "no timestamps"),
    ("? [1, 2]\n: x", "cannot be read: found unhashable key on line 1"),
    ("<<: 1", "cannot be read: expected a mapping or list of mappings for merging"),
])
def test_an_explicit_tag_with_a_value_it_cannot_take_is_a_problem(text: str, message: str,
                                                                  ) -> None:
    with pytest.raises(UntrustedInputError, match=message):
        parse_yaml(text, "config file c.yaml")


DUPLICATED_YAML = {
    "top": ("num_layers: 2\nlr: 0.1\nnum_layers: 4\n", ["'num_layers' on line 3 repeats line 1"]),
    "flow": ("{lr: 0.1, lr: 0.2}\n", ["'lr' is given twice on line 1"]),
    "nested": ("moe_layer_freq: 1\nextra:\n  a: 1\n  a: 2\n", ["'a' on line 4 repeats line 3"]),
    "same value": ("seed: 1\nseed: 1\n", ["'seed' on line 2 repeats line 1"]),
    "equal keys": ("1: a\n01: b\n", ["key 1 on line 2 repeats line 1"]),
    "several": ("a: 1\nb: 1\na: 2\nb: 2\n", ["'a' on line 3", "'b' on line 4"]),
}


@pytest.mark.parametrize("name", sorted(DUPLICATED_YAML))
def test_a_key_given_twice_in_yaml_is_named_with_its_lines(tmp_path: Path, name: str) -> None:
    text, expected = DUPLICATED_YAML[name]
    config = tmp_path / "c.yaml"
    config.write_text(text)
    messages = _problems([str(config)], tuple(MINIMAL))
    repeated = [m for m in messages if "repeats keys" in m]
    assert len(repeated) == 1 and str(config) in repeated[0], messages
    assert all(part in repeated[0] for part in expected), repeated


def test_a_merge_key_may_be_overridden(tmp_path: Path) -> None:
    data = parse_yaml("base: &b {lr: 0.1, seed: 3}\nrun:\n  <<: *b\n  lr: 0.2\n", "test")
    assert data["run"] == {"lr": 0.2, "seed": 3}


@pytest.mark.parametrize("text, key", [
    ('{"num_layers": 2, "num_layers": 4}', "num_layers"),
    ('{"a": {"b": 1, "b": 2}}', "b"),
    ('{"lr": [1, {"x": 1, "x": 1}]}', "x"),
])
def test_a_key_given_twice_in_json_is_named(tmp_path: Path, text: str, key: str) -> None:
    config = tmp_path / "c.json"
    config.write_text(text)
    messages = _problems([str(config)], tuple(MINIMAL))
    assert any(f"key {key!r} is given more than once" in m and str(config) in m
               for m in messages), messages


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.mark.parametrize("form", ["inline", "file"])
def test_a_key_given_twice_in_defaults_is_a_usage_error(tmp_path: Path, form: str) -> None:
    text = '{"num_layers": 2, "lr": 0.1, "num_layers": 4}'
    defaults = text
    if form == "file":
        (tmp_path / "d.json").write_text(text)
        defaults = f"@{tmp_path / 'd.json'}"
    code, err = _cli("resolve", "--defaults", defaults, "--assume-device-capability", "none",
                     "--", *MINIMAL)
    assert code == 2 and "Traceback" not in err
    assert "repeats keys" in err and "'num_layers' is given more than once" in err, err
    if form == "file":
        assert str(tmp_path / "d.json") in err


def test_many_repeated_keys_are_listed_up_to_a_bound() -> None:
    text = "{" + ", ".join(f'"k{i}": 1, "k{i}": 2' for i in range(100)) + "}"
    with pytest.raises(UntrustedInputError) as info:
        parse_json(text, "--defaults")
    assert str(info.value).count("is given more than once") == 10
    assert "and 90 more" in str(info.value)


def test_yaml_output_reads_back_as_written() -> None:
    """Text that only YAML 1.2 reads as a number (``0o10``, ``1e3``) is quoted on output."""
    from megaplug.sources._files import dump_yaml

    data = {"octal": "0o10", "exponent": "1e3", "leading_zero": "010", "word": "yes",
            "colon": "1:20", "underscore": "1_000", "dot": ".5", "null_text": "null",
            "empty": "", "small": 1e-05, "infinite": math.inf, "none": None, "flag": True,
            "list": [1, "2", "0x1F"], "text": "hello"}
    assert parse_yaml(dump_yaml(data), "test") == data
