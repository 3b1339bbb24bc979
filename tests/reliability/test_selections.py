"""A selection that selects nothing is a problem, never silence.

* ``MEGAPLUG_DISABLE`` and ``-p no:`` take plugin names, matched exactly and separated
  by commas: a pattern, a wrong separator, ``no:`` inside the variable, or a name no
  plugin has is a problem with a did-you-mean.
* ``--assume NAME=VERSION`` and ``--assume-device-capability`` take versions: ``2.x``,
  ``banana``, ``-1`` and ``²`` are usage errors naming the option.
* A plugin that calls ``sys.exit()`` while loading, declaring or in a hook is reported as
  broken, and megaplug carries on (``os._exit()`` ends the process; nothing in it can
  catch that).
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main
from megaplug._plugins import PluginSet
from megaplug.sources._selection import PluginSelection
from megaplug.environment import parse_assumed_capability, parse_assumed_package


def _cli(*argv: str, **environ: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with resolve_environment(**environ), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _resolve(*extra: str, **environ: str) -> tuple[int, str]:
    code, _, err = _cli("resolve", "--assume-device-capability", "none", "--", *MINIMAL,
                        *extra, **environ)
    assert "Traceback" not in err
    return code, err


# -- MEGAPLUG_DISABLE and -p no: ----------------------------------------------------------

DISABLE = {
    "MOE": ["cannot block plugin 'MOE'", "did you mean moe?"],
    "mo": ["cannot block plugin 'mo'", "did you mean moe?"],
    "banana": ["cannot block plugin 'banana'", "megaplug list names"],
    "*": ["MEGAPLUG_DISABLE entry '*': a pattern", "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD=1"],
    "moe*": ["MEGAPLUG_DISABLE entry 'moe*': a pattern"],
    "no:moe": ["MEGAPLUG_DISABLE entry 'no:moe'", "write MEGAPLUG_DISABLE=moe"],
    "moe;mla": ["MEGAPLUG_DISABLE entry 'moe;mla': not a plugin name", "separate names with "
                "commas"],
    "moe mla": ["MEGAPLUG_DISABLE entry 'moe mla': not a plugin name"],
    "moe,MLA": ["cannot block plugin 'MLA'", "did you mean mla?"],
}


@pytest.mark.parametrize("value", sorted(DISABLE))
def test_a_disable_entry_that_blocks_nothing_is_a_problem(value: str) -> None:
    code, err = _resolve(MEGAPLUG_DISABLE=value)
    assert code == 2
    for part in DISABLE[value]:
        assert part in err, err


@pytest.mark.parametrize("value", ["moe", "moe,mla", " moe , mla ,", "moe,,mla"])
def test_comma_separated_names_block_their_plugins(value: str) -> None:
    selection = PluginSelection.from_environment({"MEGAPLUG_DISABLE": value})
    assert selection.block == {"moe", "mla"} & set(value.replace(" ", "").split(","))
    assert selection.problems == []
    kernel, _ = megaplug.load([], environ={"MEGAPLUG_DISABLE": value})
    assert kernel.plugins.records["moe"].status == "blocked"
    assert not kernel.setup_problems
    code, err = _resolve("--num-experts", "4", MEGAPLUG_DISABLE=value)
    assert code == 2 and "--num-experts belongs to plugin 'moe', which is blocked" in err


@pytest.mark.parametrize("entry, expected", [
    ("no:MOE", "did you mean moe?"),
    ("no:*", "-p no:*: a pattern"),
    ("no:no:moe", "-p no:no:moe: not a plugin name"),
])
def test_a_p_no_entry_that_blocks_nothing_is_a_problem(entry: str, expected: str) -> None:
    code, err = _resolve("-p", entry)
    assert code == 2 and expected in err, err


def test_blocking_a_plugin_that_is_not_loaded_without_autoload_is_fine() -> None:
    selection = PluginSelection(block=["moe"], autoload=False)
    assert PluginSet(selection).selection_problems == []


def test_megaplug_list_shows_selection_problems() -> None:
    code, out, err = _cli("list", MEGAPLUG_DISABLE="MOE")
    assert code == 0 and "cannot block plugin 'MOE'" in out + err


# -- --assume ----------------------------------------------------------------------------

@pytest.mark.parametrize("item, expected", [
    ("transformer_engine=2.17.1", ("transformer_engine", "2.17.1")),
    ("transformer_engine=2.17.1+cu12", ("transformer_engine", "2.17.1+cu12")),
    ("transformer-engine=2.7.0.dev0", ("transformer_engine", "2.7.0.dev0")),
    ("Transformer_Engine=1.0rc1", ("transformer_engine", "1.0rc1")),
    ("apex=none", ("apex", None)),
    ("torch=2.6.0a0+git1234abc", ("torch", "2.6.0a0+git1234abc")),
    ("my_own_package=3", ("my_own_package", "3")),
])
def test_assumed_versions_that_are_versions(item: str, expected: tuple[str, str]) -> None:
    assert parse_assumed_package(item) == expected


@pytest.mark.parametrize("item, expected", [
    ("transformer_engine=2.x", "'2.x' is not a version"),
    ("transformer_engine=banana", "'banana' is not a version"),
    ("transformer_engine=-1", "'-1' is not a version"),
    ("transformer_engine=", "'' is not a version"),
    ("transformer_engine=v2.1", "'v2.1' is not a version"),
    ("transformer_engine=²", "'²' is not a version"),
    ("transformer_enigne=2.1", "did you mean transformer_engine?"),
    ("transformer_engine", "expects NAME=VERSION"),
    ("=2.1", "expects NAME=VERSION"),
    ("te/x=2.1", "'te/x' is not a package name"),
])
def test_assumed_versions_that_are_not_versions(item: str, expected: str) -> None:
    with pytest.raises(ValueError, match=expected.replace("?", r"\?").replace("+", r"\+")):
        parse_assumed_package(item)
    code, _, err = _cli("resolve", "--assume", item, "--assume-device-capability", "none",
                        "--", *MINIMAL)
    assert code == 2 and expected in err and "Traceback" not in err


@pytest.mark.parametrize("text, expected", [("9.0", (9, 0)), ("10", (10, 0)),
                                            ("8.6", (8, 6)), ("none", None), ("NONE", None)])
def test_assumed_capabilities(text: str, expected: tuple[int, int] | None) -> None:
    assert parse_assumed_capability(text) == expected


@pytest.mark.parametrize("text", ["²", "9.x", "-1", "0.0", "1e3", "9.0.1", "", "٩.٠", "sm90"])
def test_assumed_capabilities_that_are_not_capabilities(text: str) -> None:
    with pytest.raises(ValueError, match="expects MAJOR.MINOR"):
        parse_assumed_capability(text)
    code, _, err = _cli("resolve", f"--assume-device-capability={text}", "--", *MINIMAL)
    assert code == 2 and "--assume-device-capability expects MAJOR.MINOR" in err


def test_every_malformed_assumption_is_named_at_once() -> None:
    code, _, err = _cli("resolve", "--assume", "transformer_engine=2.x", "--assume",
                        "apex=banana", "--assume-device-capability", "9.x", "--", *MINIMAL)
    assert code == 2
    assert "'2.x'" in err and "'banana'" in err and "'9.x'" in err


# -- plugins that exit -------------------------------------------------------------------

EXITING = {
    "exit_on_import": ("import sys\nsys.exit(3)\n", "import of exit_on_import failed: it "
                       "called sys.exit(3)"),
    "exit_with_text": ("raise SystemExit('no GPU here')\n", "sys.exit('no GPU here')"),
    "exit_in_add_args": ("""
        import sys
        from megaplug import hookimpl

        @hookimpl
        def add_args(flags):
            sys.exit(5)
    """, "raised SystemExit in add_args: 5"),
    "exit_in_validate": ("""
        import sys
        from megaplug import hookimpl

        @hookimpl
        def validate(config):
            sys.exit(0)
    """, "raised SystemExit in validate: 0"),
}


@pytest.mark.parametrize("name", sorted(EXITING))
def test_a_plugin_calling_sys_exit_is_reported_broken(tmp_path: Path, name: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    source, expected = EXITING[name]
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    code, err = _resolve("-p", name)
    assert code == 2 and expected in err and f"[{name}]" in err, err
    code, out, err = _cli("list", "-p", name)
    assert code == 0 and name in out and "model" in out
    code, _err = _resolve("-p", name, "-p", f"no:{name}")
    assert code == 0, _err
