"""Issue 31, class 3: a value from a file or ``--defaults`` is checked as the command line
checks it.

Two properties over every flag of the real table that takes a value (hypothesis,
``derandomize=True``), for each source that can carry it -- a YAML file, a JSON file (both
written by megaplug's own writers), the caller's defaults (``--defaults`` /
``args_defaults``), and a checkpoint's saved value (converted as ``--use-checkpoint-args``
converts it); the environment's variables are compared with their flag and a file:

* **Text is text.** The same texts, typed after the flag on the command line or written
  as strings in a source (a list of them for a list flag), are accepted or refused alike
  and give the same value: counts (``nargs`` 3, ``+``, ``*``), a text with spaces (one
  path, not two), ``''``, choices, every flag kind.
* **Values reload.** The value the command line made, written as megaplug writes it
  (``encode``), reads back from every source as that same value: a signal, a tuple, a
  ``BLOCK=SIZE`` pair, ``type=bool``'s ``False``.

Then the issue's examples one by one, and a setting spelled twice in one source.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import megaplug
from megaplug._errors import Problem
from megaplug._options import choice_name
from megaplug.sources._files import to_yaml
from megaplug.values._encoding import encode, to_json
from megaplug.values._loaded import same_json

from reliability_support import MINIMAL, resolve_environment

EXAMPLES = int(os.environ.get("MEGAPLUG_ROUND3_EXAMPLES", 300))
SETTINGS = dict(deadline=None, derandomize=True, database=None, max_examples=EXAMPLES,
                suppress_health_check=list(HealthCheck))

KERNEL, _ = megaplug.load([])
#: Flags that read a checkpoint or a file when given: not values to give at random.
_LEFT_OUT = {"load", "pretrained_checkpoint", "yaml_cfg"}
FLAGS = sorted((spec for spec in KERNEL.table if spec.kind == "flag" and spec.takes_value
                and spec.dest not in _LEFT_OUT), key=lambda spec: spec.primary)
#: Every (action, nargs, type) the table has is among the flags drawn.
KINDS = {(spec.action, spec.nargs, spec.type_name) for spec in FLAGS}

#: Texts per type; none starts with '-' but negative numbers, which the command line
#: reads as a flag of its own.
_NUMBERS = ["0", "1", "8", "-3", "2.5", "1e3", "inf", "nan", "x", "", " 7", "0x1F"]
_TEXTS = ["a", "a b", "/mnt/my data/corpus", "", "true", "false", "0", "8", "null", "~",
          "1:20", "日本", "x=1", "1,2"]
_PARSED = ["128,0", "128, 0", "BLOCK_SIZE=128", "SIGUSR1", "SIGTERM", "10", "4", "0",
           "[1,0,1]", "([1]*3+[0])*2", '{"a": 1}', "attn", "full", "", "x", "false", "True"]


def texts_for(spec: Any) -> list[str]:
    pool = _NUMBERS if spec.type in (int, float) or spec.type_name == "float" else (
        _TEXTS if spec.type in (str, None) else _PARSED)
    return [*pool, *(choice_name(c) for c in spec.choices or ())]


@st.composite
def flag_and_texts(draw: Any) -> tuple[Any, list[str]]:
    spec = draw(st.sampled_from(FLAGS))
    # a single-value flag takes one text (a source has no form for `--flag` alone)
    count = draw(st.integers(0, 4)) if spec.nargs is not None else 1
    return spec, [draw(st.sampled_from(texts_for(spec))) for _ in range(count)]


# -- one fill, per source ----------------------------------------------------------------

def verdict(draft: Any, sink: Any, dest: str) -> tuple[str, Any]:
    """('refused', None) when filling reported a problem, else ('ok', the encoded value)."""
    if sink.problems:
        return "refused", None
    return "ok", encode(draft[dest])


def from_command_line(spec: Any, texts: list[str]) -> tuple[str, Any]:
    draft, sink = KERNEL.parse([spec.primary, *texts], environ={})
    return verdict(draft, sink, spec.dest)


def from_file(spec: Any, raw: Any, tmp: Path, form: str) -> tuple[str, Any]:
    path = tmp / f"settings.{form}"
    data = {spec.dest: raw}
    path.write_text(to_yaml(data) if form == "yaml" else to_json(data))
    draft, sink = KERNEL.parse([], config_files=[str(path)], environ={})
    return verdict(draft, sink, spec.dest)


def from_caller(spec: Any, raw: Any) -> tuple[str, Any] | None:
    """Caller defaults fill settings that are still unset: only those can be compared."""
    if spec.default is not None:
        return None
    draft, sink = KERNEL.parse([], defaults={spec.dest: raw}, environ={})
    return verdict(draft, sink, spec.dest)


def from_checkpoint(spec: Any, raw: Any) -> tuple[str, Any]:
    value = KERNEL.convert(spec, raw, source="checkpoint", detail="ckpt")
    return ("refused", None) if isinstance(value, Problem) else ("ok", encode(value))


def as_loaded(spec: Any, texts: list[str]) -> Any:
    """The texts as a source holds them: one text for a single-value flag, else a list."""
    return texts[0] if spec.nargs is None else list(texts)


@settings(**SETTINGS)
@given(flag_and_texts())
def test_text_from_any_source_is_read_as_the_command_line_reads_it(tmp_path_factory, drawn):
    spec, texts = drawn
    expected = from_command_line(spec, texts)
    raw = as_loaded(spec, texts)
    tmp = tmp_path_factory.mktemp("text")
    found = {"yaml": from_file(spec, raw, tmp, "yaml"), "json": from_file(spec, raw, tmp, "json"),
             "caller": from_caller(spec, raw), "checkpoint": from_checkpoint(spec, raw)}
    for source, outcome in found.items():
        if outcome is not None:
            assert outcome[0] == expected[0] and same_json(outcome[1], expected[1]), (
                source, spec.primary, texts, outcome, expected)


@settings(**SETTINGS)
@given(flag_and_texts())
def test_every_value_the_command_line_makes_reloads_from_every_source(tmp_path_factory, drawn):
    spec, texts = drawn
    draft, sink = KERNEL.parse([spec.primary, *texts], environ={})
    if sink.problems:
        return
    value = draft[spec.dest]
    written = encode(value)
    tmp = tmp_path_factory.mktemp("value")
    for source, outcome in {"yaml": from_file(spec, written, tmp, "yaml"),
                            "json": from_file(spec, written, tmp, "json"),
                            "caller": from_caller(spec, written),
                            "checkpoint": from_checkpoint(spec, value)}.items():
        if outcome is not None:
            assert outcome[0] == "ok" and same_json(outcome[1], written), (
                source, spec.primary, texts, written, outcome)


@pytest.mark.parametrize("text", _NUMBERS)
def test_the_environment_reads_text_as_the_command_line_and_files_do(tmp_path, text):
    """``LOCAL_RANK`` and ``--local-rank``; ``WORLD_SIZE`` and a file's ``world_size``."""
    local = KERNEL.table.by_env["LOCAL_RANK"]
    draft, sink = KERNEL.parse([], environ={"LOCAL_RANK": text})
    assert verdict(draft, sink, local.dest) == from_command_line(local, [text])
    world = KERNEL.table.by_env["WORLD_SIZE"]
    draft, sink = KERNEL.parse([], environ={"WORLD_SIZE": text})
    assert verdict(draft, sink, world.dest) == from_file(world, text, tmp_path, "yaml")


SWITCHES = sorted((spec for spec in KERNEL.table if spec.kind == "flag"
                   and spec.action in ("store_true", "store_false", "boolean_optional")),
                  key=lambda spec: spec.primary)


@pytest.mark.parametrize("form", ["yaml", "json", "caller", "checkpoint"])
def test_every_switch_takes_a_boolean_from_every_source_and_nothing_else(tmp_path, form):
    """``--fp16`` is ``fp16: true``; ``--no-x`` is ``x: false``; ``'true'`` and ``1`` are
    refused, never taken for a boolean. (Caller defaults fill only unset settings: their
    value is compared where the switch's default is None.)"""
    def loaded(spec: Any, raw: Any) -> tuple[str, Any]:
        if form == "checkpoint":
            return from_checkpoint(spec, raw)
        if form == "caller":
            draft, sink = KERNEL.parse([], defaults={spec.dest: raw}, environ={})
            outcome = verdict(draft, sink, spec.dest)
            return outcome if spec.default is None or outcome[0] == "refused" else (
                "ok", encode(raw))
        return from_file(spec, raw, tmp_path, form)

    wrong = []
    for spec in SWITCHES:
        expected = from_command_line(spec, [])  # the switch's own spelling: its const
        if loaded(spec, expected[1]) != expected:
            wrong.append((spec.primary, "value", expected))
        for raw in ("true", 1):
            if loaded(spec, raw)[0] != "refused":
                wrong.append((spec.primary, raw, loaded(spec, raw)))
    assert len(SWITCHES) > 300 and wrong == []


def test_the_flags_drawn_cover_every_kind():
    nargs = {spec.nargs for spec in FLAGS}
    assert {None, "+", "*", 3} <= nargs
    assert {"int", "float", "str", "bool", "signal", "tuple_type", "block size"} <= {
        spec.type_name for spec in FLAGS}
    assert any(spec.choices for spec in FLAGS) and len(KINDS) > 15


# -- the issue's examples -----------------------------------------------------------------

def resolve_file(tmp_path: Path, text: str, suffix: str = "yaml") -> list[str] | dict:
    path = tmp_path / f"c.{suffix}"
    path.write_text(text)
    with resolve_environment():
        try:
            return megaplug.resolve([*MINIMAL, "--config", str(path)], environ={}).to_dict()
        except megaplug.ConfigError as exc:
            return [p.message for p in exc.problems]


def resolve_defaults(defaults: dict) -> list[str] | dict:
    try:
        return megaplug.resolve(MINIMAL, defaults=defaults, environ={}).to_dict()
    except megaplug.ConfigError as exc:
        return [p.message for p in exc.problems]


@pytest.mark.parametrize("value, message", [
    ("[8]", "expected 3 values, got 1: [8]"),
    ("[]", "expected 3 values, got 0: []"),
    ("[8, 16, 100, 4]", "expected 3 values, got 4: [8, 16, 100, 4]"),
    ("8", "expected 3 values, got 1: 8"),
])
def test_rampup_batch_size_takes_three_values_from_a_file(tmp_path, value, message):
    assert resolve_file(tmp_path, f"rampup_batch_size: {value}\n") == [
        f"--rampup-batch-size in config file {tmp_path / 'c.yaml'}: {message}"]
    assert resolve_defaults({"rampup_batch_size": json.loads(value)}) == [
        f"rampup_batch_size in the caller's defaults: {message}"]


def test_a_list_flag_needs_a_value_from_a_file_too(tmp_path):
    assert resolve_file(tmp_path, "mrope_section: []\n") == [
        f"--mrope-section in config file {tmp_path / 'c.yaml'}: expected at least one value, "
        "got none"]
    assert resolve_file(tmp_path, "mrope_section: [8, 8]\n")["mrope_section"] == [8, 8]


@pytest.mark.parametrize("loaded, expected", [("false", False), ("true", True)])
def test_a_boolean_loaded_for_a_bool_typed_flag_is_that_boolean(tmp_path, loaded, expected):
    assert resolve_file(tmp_path, f"onnx_safe: {loaded}\n")["onnx_safe"] is expected
    assert resolve_file(tmp_path, f'{{"onnx_safe": {loaded}}}', "json")["onnx_safe"] is expected
    assert resolve_defaults({"onnx_safe": expected})["onnx_safe"] is expected


@pytest.mark.parametrize("loaded", ["0", "1", "[]"])
def test_a_number_for_a_bool_typed_flag_is_refused_not_read_as_true(tmp_path, loaded):
    found = resolve_file(tmp_path, f"onnx_safe: {loaded}\n")
    assert isinstance(found, list) and len(found) == 1
    assert found[0].startswith(f"--onnx-safe in config file {tmp_path / 'c.yaml'}: invalid "
                               f"bool value {json.loads(loaded)!r}")


def test_a_text_with_a_space_is_one_path(tmp_path):
    assert resolve_file(tmp_path, "data_path: /mnt/my data/corpus\n")["data_path"] == [
        "/mnt/my data/corpus"]
    assert resolve_defaults({"data_path": "/mnt/my data/corpus"})["data_path"] == [
        "/mnt/my data/corpus"]


@pytest.mark.parametrize("text, suffix, spellings", [
    ("log_interval: 5\nlog-interval: 6\n", "yaml", "'log_interval' and 'log-interval'"),
    ("log-interval: 5\n--log-interval: 6\n", "yaml", "'log-interval' and '--log-interval'"),
    ('{"log_interval": 5, "log-interval": 6}', "json", "'log_interval' and 'log-interval'"),
])
def test_a_setting_given_under_two_spellings_in_one_file_is_refused(tmp_path, text, suffix,
                                                                     spellings):
    assert resolve_file(tmp_path, text, suffix) == [
        f"log_interval is given 2 times in config file {tmp_path / f'c.{suffix}'}, as "
        f"{spellings} (the last would silently win)"]


def test_a_setting_given_under_two_spellings_in_the_defaults_is_refused():
    assert resolve_defaults({"log_interval": 5, "--log-interval": 6}) == [
        "log_interval is given 2 times in the caller's defaults, as 'log_interval' and "
        "'--log-interval' (the last would silently win)"]


def test_a_default_spelled_as_a_flag_sets_the_setting():
    resolved = resolve_defaults({"--rampup-batch-size": [8, 8, 100]})
    assert resolved["rampup_batch_size"] == [8, 8, 100]
    assert "--rampup-batch-size" not in resolved


def test_the_issue_examples_on_the_command_line(tmp_path):
    """``megaplug resolve --defaults``: the CLI reads it through the same conversion."""
    from megaplug.cli import main

    with resolve_environment():
        code = main(["resolve", "--defaults", '{"onnx_safe": 0, "mrope_section": []}', "--",
                     *MINIMAL])
    assert code == 2
