"""Help that finds itself, and the CLI contract: list, flags, --version, pipes, docs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli_support import megaplug_process, run, subprocess_env


def test_explain_help_is_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        run(capsys, "explain", "--help")
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert out.startswith("usage: megaplug explain DEST_OR_FLAG")
    assert "DEST_OR_FLAG is a setting (ffn_hidden_size) or one of its flags" in out


def test_resolve_help_shows_plugin_controls_and_the_way_to_the_training_flags(capsys):
    with pytest.raises(SystemExit):
        run(capsys, "resolve", "--help")
    out = capsys.readouterr().out
    for text in ("-p NAME", "-p no:NAME", "--no-autoload", "ARGS are the training flags",
                 "megaplug flags WORD", "megaplug resolve -- --help"):
        assert text in out, text


def test_every_command_named_in_a_help_or_hint_exists(capsys, clean_env):
    from megaplug.cli._parser import COMMANDS

    with pytest.raises(SystemExit):
        run(capsys, "--help")
    top = capsys.readouterr().out
    for command in COMMANDS:
        assert command in top
    # the kernel's hint for a malformed command line names `megaplug flags`, which exists
    code, _, err = run(capsys, "resolve", "--", "--num-layers")
    assert code == 2 and "megaplug flags WORD lists the accepted flags" in err
    assert run(capsys, "flags", "layers")[0] == 0


def test_training_flag_help_after_the_separator(clean_env):
    result = megaplug_process("resolve", "--", "--help")
    assert result.returncode == 0
    assert "plugin model:" in result.stdout and "--num-layers" in result.stdout


def test_command_typos_get_did_you_mean(capsys):
    code, out, err = run(capsys, "lis")
    assert (code, out) == (2, "")
    assert err.strip() == ("megaplug: unknown command 'lis' (did you mean list?); the commands "
                           "are list, flags, resolve, explain, diff, upgrade, memory, plan, "
                           "export, import, schema, completion, docs")
    code, _, err = run(capsys, "explian", "lr")
    assert code == 2 and "did you mean explain?" in err
    code, _, err = run(capsys)
    assert code == 2 and "a command is needed" in err


def test_version_prints_megaplug_and_every_plugin(capsys, clean_env):
    import megaplug

    code, out, _ = run(capsys, "--version")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"megaplug {megaplug.__version__} (Python ")
    plugins = {line.split()[0]: line for line in lines[1:]}
    assert {"model", "training", "moe", "kitchen"} <= set(plugins)
    assert plugins["moe"].split() == ["moe", "0.1.0", "megaplug-moe", "(active)"]
    assert "(unavailable: requires kitchen, not installed)" in plugins["kitchen"]


def test_explain_finds_its_setting_after_its_own_options(capsys, toy_env):
    code, out, _ = run(capsys, "explain", "--defaults", '{"hidden_size": 4}', "ffn_hidden_size")
    assert code == 0 and "value:     16" in out
    code, _, err = run(capsys, "explain")
    assert code == 2 and "which setting?" in err


# -- flags -----------------------------------------------------------------------------

def test_flags_text_shows_help_lines_and_filters_by_word(capsys, clean_env):
    code, out, _ = run(capsys, "flags", "--plugin", "model", "attention-heads")
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == ("[model] --num-attention-heads -> num_attention_heads  "
                        "(store int default=null)")
    assert lines[1].startswith("      Number of attention heads")
    assert all(line.startswith(("[model]", "      ")) for line in lines)


def test_flags_word_matches_help_and_dest_case_insensitively(capsys, clean_env):
    code, out, _ = run(capsys, "flags", "SWIGLU")
    assert code == 0 and "[model] --swiglu -> swiglu" in out
    code, out, err = run(capsys, "flags", "--nosuchflagword")
    assert code == 0 and out == "" and "no flag mentions '--nosuchflagword'" in err


def test_flags_json_spells_actions_as_argparse_does(capsys, clean_env):
    code, out, _ = run(capsys, "flags", "--json")
    rows = json.loads(out)
    actions = {row["action"] for row in rows if row["kind"] == "flag"}
    assert code == 0
    assert actions == {"store", "store_true", "store_false", "BooleanOptionalAction"}
    by_dest = {row["dest"]: row for row in rows}
    assert by_dest["swiglu"]["action"] == "store_true"
    assert by_dest["rank"]["action"] is None and by_dest["rank"]["env"] == "RANK"
    assert by_dest["swiglu"]["deprecated_spellings"] == []


def test_flags_of_an_unknown_plugin_is_an_error_with_a_suggestion(capsys, clean_env):
    code, out, err = run(capsys, "flags", "--plugin", "moee")
    assert (code, out) == (2, "")
    assert err.strip() == "megaplug flags: no plugin named 'moee' (did you mean moe?)"
    code, _, err = run(capsys, "flags", "--plugin", "moe", "-p", "no:moe")
    assert code == 2 and "plugin 'moe' is blocked" in err


def test_flags_of_an_unavailable_plugin_are_listed_with_its_status(capsys, clean_env):
    code, out, _ = run(capsys, "flags", "--plugin", "kitchen", "--json")
    rows = json.loads(out)
    assert code == 0 and {row["status"] for row in rows} == {"unavailable"}
    assert {row["dest"] for row in rows} == {"kitchen_config_file", "kitchen_recipe_number"}
    code, out, _ = run(capsys, "flags", "kitchen")
    assert "[kitchen] --kitchen-config-file -> kitchen_config_file" in out
    assert "[plugin unavailable]" in out


# -- list ------------------------------------------------------------------------------

def test_list_has_a_header_and_sorts_by_name_unless_asked_for_the_order(capsys, clean_env):
    code, out, _ = run(capsys, "list")
    *lines, target = [line for line in out.splitlines() if not line.lstrip().startswith("->")]
    assert target.startswith("target Megatron: ")  # the release line and where it came from
    assert code == 0 and lines[0].split() == ["PLUGIN", "STATUS", "VERSION", "DISTRIBUTION",
                                              "FLAGS", "HOOKS", "ORDERING"]
    names = [line.split()[0] for line in lines[1:]]
    assert names == sorted(names)
    kitchen = next(line for line in lines if line.startswith("kitchen"))
    assert kitchen.split()[:5] == ["kitchen", "unavailable", "0.1.0", "megaplug-kitchen", "2"]
    code, out, _ = run(capsys, "list", "--order")
    ordered = [line.split()[0] for line in out.splitlines()[1:-1]
               if not line.lstrip().startswith("->")]
    assert ordered.index("parallel") < ordered.index("training")
    assert ordered.index("parallel") < ordered.index("gtp") and ordered[-1] == "kitchen"


def test_list_warns_when_a_plugin_and_its_entry_point_are_named_apart(
        capsys, clean_env, monkeypatch, tmp_path):
    from megaplug import _api
    from megaplug.cache import _entry_points

    (tmp_path / "renamed_plugin.py").write_text(
        "from megaplug import PluginInfo\nmegaplug_plugin = PluginInfo(name='renamed')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = _entry_points.EntryPointInfo("oldname", "renamed_plugin", "megaplug-renamed", "1.0")
    monkeypatch.setattr(_entry_points, "_MEMO", [*_entry_points.entry_points(), fake])
    monkeypatch.setenv("MEGAPLUG_NO_CACHE", "1")
    monkeypatch.setattr(_api, "_KERNELS", {})
    code, out, err = run(capsys, "list")
    assert code == 0 and "renamed" in out
    assert ("megaplug: warning: plugin 'renamed' is installed under the entry point name "
            "'oldname'") in err
    assert "the entry point should be named 'renamed'" in err
    assert err.count("warning") == 1


# -- pipes and docs ----------------------------------------------------------------------

def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    pipeline = f"{sys.executable} -m megaplug flags | head -n 1"
    result = subprocess.run(["bash", "-o", "pipefail", "-c", pipeline], capture_output=True,
                            text=True, env=subprocess_env(MEGAPLUG_CACHE_DIR=str(tmp_path)))
    assert result.stdout.startswith("[")
    assert result.stderr == ""  # no BrokenPipeError traceback
    assert result.returncode == 141  # what `yes | head` reports under pipefail


def test_docs_says_where_it_writes(capsys, clean_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "docs", "-p", "no:lora")
    target = tmp_path / "docs" / "flags"
    assert code == 0
    written = sorted(path.name for path in target.iterdir())
    assert out.startswith(f"wrote {len(written)} files to {target}: checkpointing.md, data.md")
    assert {"index.md", "model.md", "moe.md", "kitchen.md"} <= set(written)
    index = (target / "index.md").read_text()
    assert "| [kitchen](kitchen.md) | unavailable | 2 |" in index and "lora" not in index
    assert "**unavailable** here: requires kitchen" in (target / "kitchen.md").read_text()
