"""Issue 31, class 8: environment switches. Every yes/no variable megaplug reads goes
through one reader (``sources._switches``): the yes and no words mean what they say, unset
or empty means the default, anything else is a problem naming the variable. The caches
never land in the filesystem root or the working directory because ``HOME`` is odd."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import megaplug
from megaplug.cache._store import cache_directory
from megaplug.sources._selection import PluginSelection
from megaplug.sources._switches import SWITCHES, SwitchError, switch

SOURCE = Path(megaplug.__file__).resolve().parent
REPOSITORY = SOURCE.parents[1]

YES = ["1", "true", "yes", "on", "TRUE", " Yes ", "On"]
NO = ["0", "false", "no", "off", "False", " NO", "oFF "]
UNSET = [None, "", "   "]
NEITHER = ["maybe", "2", "-1", "y", "n", "enable", "tru", "0 0", "\u0661"]

#: The variables megaplug reads that are not yes/no: names, paths, numbers.
NOT_SWITCHES = {"MEGAPLUG_PLUGINS", "MEGAPLUG_DISABLE", "MEGAPLUG_CACHE_DIR",
                "MEGAPLUG_ASSUME_MOE_IMBALANCE"}


def test_every_yes_no_variable_in_the_code_is_read_by_the_one_reader():
    named = set()
    for path in [*SOURCE.rglob("*.py"), *REPOSITORY.glob("plugins/*/src/**/*.py")]:
        named.update(re.findall(r"MEGAPLUG_[A-Z_]+[A-Z]", path.read_text()))
    assert named - NOT_SWITCHES == set(SWITCHES)


@pytest.mark.parametrize("name", sorted(SWITCHES))
@pytest.mark.parametrize("default", [False, True])
@pytest.mark.parametrize("value", [*YES, *NO, *UNSET])
def test_each_switch_reads_the_yes_and_no_words_and_defaults_when_unset(name, default, value):
    environ = {} if value is None else {name: value}
    expected = default if value in UNSET else value in YES
    assert switch(name, default, environ) is expected


@pytest.mark.parametrize("name", sorted(SWITCHES))
@pytest.mark.parametrize("value", NEITHER)
def test_a_value_that_is_neither_is_an_error_naming_the_variable(name, value):
    with pytest.raises(SwitchError, match=re.escape(f"{name}={value!r} is neither yes nor no")):
        switch(name, False, {name: value})


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=8))
def test_any_value_is_yes_no_default_or_refused(value):
    word = value.strip().lower()
    try:
        answer = switch("MEGAPLUG_NO_CACHE", None,  # type: ignore[arg-type]  (None: unset)
                        {"MEGAPLUG_NO_CACHE": value})
    except SwitchError:
        assert word not in {"", "1", "true", "yes", "on", "0", "false", "no", "off"}
        return
    assert answer is (None if not word else word in {"1", "true", "yes", "on"})


@pytest.mark.parametrize("value", [*YES, *NO, *UNSET, *NEITHER])
def test_the_selection_reads_the_autoload_switch_and_reports_what_it_cannot(value):
    environ = {} if value is None else {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": value}
    selection = PluginSelection.from_environment(environ)
    assert selection.autoload is (value not in YES)
    messages = [message for message, _hint in selection.problems]
    if value in NEITHER:
        assert messages == [f"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD={value!r} is neither yes nor no"]
    else:
        assert messages == []


@pytest.mark.parametrize("name", sorted(SWITCHES))
def test_the_api_reports_a_switch_it_cannot_read_as_a_problem(name, monkeypatch, tmp_path):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(megaplug.ConfigError) as error:
        megaplug.resolve(["--num-layers", "2"])
    assert f"{name}='maybe' is neither yes nor no" in str(error.value)


def _megaplug(*argv, cwd, **env):
    from tests.cli.cli_support import subprocess_env

    environ = subprocess_env(**env)
    for name, value in env.items():
        if value is None:
            environ.pop(name, None)
    return subprocess.run([sys.executable, "-m", "megaplug", *argv], capture_output=True,
                          text=True, env=environ, cwd=cwd)


@pytest.mark.parametrize("value", ["false", "no", "0", ""])
def test_autoload_stays_on_for_the_no_words(value, tmp_path):
    result = _megaplug("list", cwd=tmp_path, MEGAPLUG_CACHE_DIR=str(tmp_path / "cache"),
                       MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD=value)
    assert result.returncode == 0, result.stderr
    assert re.search(r"^moe +active", result.stdout, re.MULTILINE)


@pytest.mark.parametrize("name", sorted(SWITCHES))
@pytest.mark.parametrize("command", [["list"], ["flags", "num-layers"], ["resolve", "--"]])
def test_every_command_refuses_a_switch_it_cannot_read(name, command, tmp_path):
    result = _megaplug(*command, cwd=tmp_path, MEGAPLUG_CACHE_DIR=str(tmp_path / "cache"),
                       **{name: "maybe"})
    assert result.returncode == 2
    assert result.stderr.startswith(f"megaplug: {name}='maybe' is neither yes nor no (use 1, ")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("value", "expected"), [("", True), ("  ", True), ("0", False),
                                                 ("off", False), ("yes", True)])
def test_the_command_line_runs_preflight_unless_the_switch_says_no(value, expected,
                                                                   monkeypatch):
    from megaplug.cli._shared import preflight_wanted

    monkeypatch.setenv("MEGAPLUG_PREFLIGHT", value)
    assert preflight_wanted() is expected


# -- where the caches live ---------------------------------------------------------------

@pytest.mark.parametrize(("environ", "expected"), [
    ({"MEGAPLUG_CACHE_DIR": "/c", "HOME": "/h"}, "/c"),
    ({"MEGAPLUG_CACHE_DIR": "/", "HOME": "/h"}, None),
    ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/megaplug"),
    ({"XDG_CACHE_HOME": "relative", "HOME": "/h"}, "/h/.cache/megaplug"),
    ({"XDG_CACHE_HOME": "/", "HOME": "/h"}, "/h/.cache/megaplug"),
    ({"XDG_CACHE_HOME": "", "HOME": "/h"}, "/h/.cache/megaplug"),
    ({"HOME": "/h"}, "/h/.cache/megaplug"),
    ({"HOME": ""}, None),
    ({"HOME": "/"}, None),
    ({"HOME": "//"}, None),
    ({"HOME": "relative/home"}, None),
    ({"HOME": "."}, None),
])
def test_the_cache_directory_is_never_the_root_or_the_working_directory(environ, expected):
    assert cache_directory(environ) == expected


@pytest.mark.parametrize("home", ["", "/", "."])
def test_an_odd_home_turns_the_cache_off_rather_than_writing_beside_it(home, tmp_path):
    result = _megaplug("flags", "num-layers", cwd=tmp_path, HOME=home, MEGAPLUG_CACHE_DIR=None,
                       XDG_CACHE_HOME=None)
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []
    assert not Path("/.cache/megaplug").exists()


@pytest.mark.parametrize(("value", "under_switch", "expected"), [
    (None, False, False), ("", False, False), ("  ", True, True), ("0", True, False),
    ("no", True, False), ("1", False, True), ("on", False, True), ("maybe", False, False)])
def test_the_facade_reads_the_preflight_switch_with_the_one_reader(value, under_switch,
                                                                   expected, monkeypatch):
    from megaplug.megatron import _facade

    monkeypatch.setattr(_facade, "UNDER_SWITCH", under_switch)
    environ = {} if value is None else {"MEGAPLUG_PREFLIGHT": value}
    assert _facade.preflight_on(environ) is expected
