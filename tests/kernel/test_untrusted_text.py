"""Issue 31, class 6: what megaplug is handed never ends in a traceback. Characters YAML
does not allow, values nested deeper than any setting needs -- from any source: a flag's
JSON text, a YAML string holding it, a file, ``--defaults`` --, YAML too large to read in
bounded time, keys that name no setting in ``diff``, the namespace's own attributes in
``--defaults``: each is a problem, exit 2."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megaplug.cli import main
from megaplug.sources._files import MAX_YAML_CHARS, MAX_YAML_VALUES
from megaplug.values._nesting import MAX_NESTING, too_deep

VALID = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2"]
JSON_FLAG = "--moe-megakernel-backend-config"  # a flag whose value is JSON text
JSON_SETTING = "moe_megakernel_backend_config"


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_DISABLE", "MEGAPLUG_PLUGINS"):
        monkeypatch.delenv(name, raising=False)


def _megaplug(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


# -- characters YAML does not allow --------------------------------------------------------

@pytest.mark.parametrize("character", ["\f", "\0", "\x1b", "\x7f", "\x80", "\ufffe", "\x01"])
@pytest.mark.parametrize("place", ["quoted", "plain", "comment", "key"])
def test_a_character_yaml_refuses_is_a_problem_with_its_line(capsys, tmp_path, character,
                                                              place):
    text = {"quoted": f'data_path: "a{character}b"\n', "plain": f"data_path: a{character}b\n",
            "comment": f"# a{character}b\n", "key": f"a{character}b: 1\n"}[place]
    config = tmp_path / "odd.yaml"
    config.write_text("hidden_size: 64\n" + text, encoding="utf-8")
    code, _out, err = _megaplug(capsys, "resolve", "--config", str(config), "--", *VALID)
    assert code == 2
    assert (f"config file {config} holds the character U+{ord(character):04X} on line 2, "
            "which YAML does not allow") in err


def test_a_file_that_is_no_yaml_at_all_is_a_problem(capsys):
    code, _out, err = _megaplug(capsys, "resolve", "--config", "/proc/self/environ", "--",
                                *VALID)
    assert code == 2
    assert "config file /proc/self/environ holds the character U+0000 on line 1" in err


# -- nesting ------------------------------------------------------------------------------

def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _launch(tmp_path, source: str, depth: int) -> list[str]:
    """A resolve whose JSON setting (or, for --defaults and files, some value) is nested
    ``depth`` levels deep, handed over through ``source``."""
    text = _nested(depth)
    if source == "flag":
        return ["resolve", "--", *VALID, JSON_FLAG, text]
    if source == "yaml string":
        (tmp_path / "c.yaml").write_text(f"{JSON_SETTING}: '{text}'\n")
        return ["resolve", "--config", str(tmp_path / "c.yaml"), "--", *VALID]
    if source == "yaml value":
        (tmp_path / "c.yaml").write_text(f"{JSON_SETTING}: {text}\n")
        return ["resolve", "--config", str(tmp_path / "c.yaml"), "--", *VALID]
    if source == "json value":
        (tmp_path / "c.json").write_text(f'{{"{JSON_SETTING}": {text}}}')
        return ["resolve", "--config", str(tmp_path / "c.json"), "--", *VALID]
    if source == "defaults":
        return ["resolve", "--defaults", f'{{"{JSON_SETTING}": {text}}}', "--", *VALID]
    (tmp_path / "d.json").write_text(f'{{"{JSON_SETTING}": {text}}}')
    return ["resolve", "--defaults", f"@{tmp_path / 'd.json'}", "--", *VALID]


SOURCES = ["flag", "yaml string", "yaml value", "json value", "defaults", "defaults file"]


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 600, 800, 5000])
@pytest.mark.parametrize("source", SOURCES)
def test_a_value_nested_too_deep_is_a_problem_from_every_source(capsys, tmp_path, source,
                                                                depth):
    code, out, err = _megaplug(capsys, *_launch(tmp_path, source, depth))
    assert code == 2
    assert out == ""
    assert f"nested too deeply (more than {MAX_NESTING} levels)" in err, err


@pytest.mark.parametrize("source", SOURCES)
def test_a_value_just_deep_enough_is_read(capsys, tmp_path, source):
    depth = MAX_NESTING - 1  # the file's own mapping is one level
    code, out, err = _megaplug(capsys, *_launch(tmp_path, source, depth))
    assert code == 0, err
    assert json.loads(out)[JSON_SETTING] == json.loads(_nested(depth))


@settings(max_examples=25, deadline=None)
@given(source=st.sampled_from(SOURCES), depth=st.integers(1, 6000))
def test_any_depth_from_any_source_is_read_or_refused_never_a_crash(tmp_path_factory, source,
                                                                    depth):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(_launch(tmp_path_factory.mktemp("deep"), source, depth))
    assert code in (0, 2)
    assert "Traceback" not in err.getvalue()
    assert (code == 0) == (depth < MAX_NESTING), err.getvalue()


def test_nesting_is_measured_without_recursion_and_aliases_once_per_depth():
    assert not too_deep(1) and not too_deep("[[[") and not too_deep([])
    assert not too_deep(json.loads(_nested(MAX_NESTING)))
    assert too_deep(json.loads(_nested(MAX_NESTING + 1)))
    assert too_deep(_deep_list(50_000))
    itself: list = []
    itself.append(itself)
    assert too_deep(itself)
    shared: list = [1] * 9
    for _ in range(60):  # 9**60 values if expanded
        shared = [shared] * 9
    started = time.perf_counter()
    assert not too_deep(shared)
    assert time.perf_counter() - started < 1


def _deep_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


# -- YAML read in bounded time and memory ----------------------------------------------

def test_a_yaml_file_with_too_many_values_is_refused_early(capsys, tmp_path):
    config = tmp_path / "big.yaml"
    config.write_text("data_path: [" + ",".join(["1"] * (4 * MAX_YAML_VALUES)) + "]\n")
    started = time.perf_counter()
    code, _out, err = _megaplug(capsys, "resolve", "--config", str(config), "--", *VALID)
    assert time.perf_counter() - started < 10
    assert code == 2
    assert f"config file {config}: more than {MAX_YAML_VALUES:,} values" in err


def test_a_yaml_file_too_large_is_refused_before_it_is_parsed(capsys, tmp_path):
    config = tmp_path / "huge.yaml"
    config.write_text("data_path: [" + ", ".join(["/data/x"] * 300_000) + "]\n")  # 2.7 MB
    started = time.perf_counter()
    code, _out, err = _megaplug(capsys, "resolve", "--config", str(config), "--", *VALID)
    assert time.perf_counter() - started < 5
    assert code == 2
    assert f"megaplug reads at most {MAX_YAML_CHARS:,} (write a larger one as JSON)" in err


def test_the_same_values_as_json_are_read(capsys, tmp_path):
    config = tmp_path / "big.json"
    paths = [f"/data/{index}" for index in range(2 * MAX_YAML_VALUES)]
    config.write_text(json.dumps({"data_path": paths}))
    code, out, err = _megaplug(capsys, "resolve", "--config", str(config), "--", *VALID)
    assert code == 0, err
    assert json.loads(out)["data_path"] == paths


# -- diff and --defaults keys ------------------------------------------------------------

def test_diff_refuses_keys_that_name_no_setting(capsys, tmp_path):
    config = tmp_path / "k.yaml"
    config.write_text("1: 2\n_x: 3\n")
    code, _out, err = _megaplug(capsys, "diff", str(config), str(config))
    assert code == 2
    assert f"megaplug diff: {config} has keys that name no setting: 1" in err


def test_diff_takes_a_config_with_an_underscore_key_for_a_config(capsys, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("_comment: tuned for 8 GPUs\nhidden_size: 64\n")
    code, out, err = _megaplug(capsys, "diff", str(config), str(config), "--", *VALID)
    assert code == 2
    assert f"A: config file {config}" in out
    assert "unrecognized argument _comment" in err


def test_diff_still_knows_a_saved_resolve_output(capsys, tmp_path):
    code, out, _err = _megaplug(capsys, "resolve", "--", *VALID)
    saved = tmp_path / "run.json"
    saved.write_text(out)
    code, out, err = _megaplug(capsys, "diff", str(saved), "--", *VALID)
    assert code == 0, err
    assert f"A: saved resolve output {saved}" in out
    assert "no settings differ" in out


@pytest.mark.parametrize("key", ["__class__", "__dict__", "__init__", "__weakref__"])
def test_defaults_refuse_the_namespaces_own_attributes(capsys, key):
    code, out, err = _megaplug(capsys, "resolve", "--defaults", json.dumps({key: 1}), "--",
                               *VALID)
    assert code == 2
    assert out == ""
    assert f"megaplug: --defaults names no setting with {key!r}" in err
