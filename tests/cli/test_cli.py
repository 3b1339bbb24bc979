"""The command-line contract: list, flags, resolve, explain, docs; exit codes and output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from cli_support import run, subprocess_env


def test_list_json_shows_status_reasons_hooks(toy_env, capsys):
    code, out, _ = run(capsys, "list", "--json")
    rows = {row["name"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["core"]["status"] == "active" and rows["core"]["flags"] == 14
    assert rows["core"]["hooks"] == ["add_args", "normalize", "derive", "validate"]
    assert rows["model"]["status"] == "blocked"


def test_flags_json(toy_env, capsys):
    code, out, _ = run(capsys, "flags", "--json")
    rows = {row["dest"]: row for row in json.loads(out)}
    assert code == 0
    assert rows["fusion"]["action"] == "store_false"
    assert rows["partial"]["action"] == "BooleanOptionalAction"
    assert rows["backend"]["choices"] == ["Backend.flash", "Backend.fused", "Backend.auto"]
    assert rows["old_lr"]["deprecated"] == "use --lr"
    assert rows["rank"]["env"] == "RANK"


def test_resolve_prints_every_value_as_json(toy_env, capsys):
    code, out, _ = run(capsys, "resolve", "--", "--hidden-size", "8", "--backend", "flash")
    values = json.loads(out)
    assert code == 0
    assert values["ffn_hidden_size"] == 32 and values["backend"] == "Backend.flash"
    assert values["_is_global_batch_size_explicitly_specified"] is False


def test_resolve_yaml_and_config_and_defaults(toy_env, capsys, tmp_path):
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text("num_layers: 4\n")
    code, out, _ = run(capsys, "resolve", "--format", "yaml", "--config", str(config),
                       "--defaults", '{"hidden_size": 2}')
    values = yaml.safe_load(out)
    assert code == 0 and values["num_layers"] == 4 and values["ffn_hidden_size"] == 8


def test_resolve_invalid_prints_every_problem_and_exits_2(toy_env, capsys, monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")
    code, out, err = run(capsys, "resolve", "--", "--num-layers", "0", "--hiden-size", "2")
    assert code == 2 and out == ""
    assert "3 problems" in err
    assert "[core] --num-layers must be at least 1, got 0 (hint: use 1 or more layers)" in err
    assert "did you mean --hidden-size?" in err
    assert "RANK 3 is not below WORLD_SIZE 2" in err


def test_explain_shows_owner_value_and_provenance(toy_env, capsys):
    code, out, _ = run(capsys, "explain", "--ffn-hidden-size", "--", "--hidden-size", "8")
    assert code == 0
    assert "plugin:    core" in out and "value:     32" in out
    assert "derived by core from hidden_size" in out


def test_explain_a_flag_by_spelling(toy_env, capsys):
    code, out, _ = run(capsys, "explain", "--layers", "--", "--layers", "3")
    assert code == 0
    assert "flags:     --num-layers, --layers" in out and "command line --layers" in out


def test_plugin_controls_inside_args(toy_env, capsys):
    code, _, err = run(capsys, "resolve", "--", "-p", "no:core", "--hidden-size", "8")
    assert code == 2
    assert "--hidden-size belongs to plugin 'core', which is blocked" in err


def test_usage_errors_exit_2(toy_env, capsys):
    assert run(capsys, "resolve", "--assume", "nonsense")[0] == 2
    assert run(capsys, "resolve", "--defaults", "[1]")[0] == 2
    assert run(capsys, "list", "--bogus")[0] == 2


def test_docs_writes_reference(toy_env, capsys, tmp_path):
    code, out, _ = run(capsys, "docs", "--out", str(tmp_path))
    page = (tmp_path / "core.md").read_text()
    assert code == 0 and "| `hidden_size` | `--hidden-size` | int |" in page
    assert "| `rank` | env `RANK` |" in page
    assert "[core](core.md)" in (tmp_path / "index.md").read_text()


def test_docs_index_names_its_own_folder_each_time(toy_env, capsys, tmp_path):
    # the second run finds the first's answer cached: its --out must not come with it
    for folder in (tmp_path / "first", tmp_path / "second", tmp_path / "first"):
        code, _, _ = run(capsys, "docs", "--out", str(folder))
        index = (folder / "index.md").read_text()
        assert code == 0 and f"--out {folder}`" in index, index.splitlines()[2]


def test_python_dash_m_and_no_torch_import():
    code = (
        "import sys, megaplug, megaplug.megatron\n"
        "from megaplug.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['list']); main(['flags'])\n"
        "    main(['explain', 'lr', '--', '--lr', '0.1'])\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=subprocess_env(), check=True)
    assert result.stdout.strip().splitlines()[-1] == "False"
    result = subprocess.run([sys.executable, "-m", "megaplug", "list", "--json"],
                            capture_output=True, text=True, env=subprocess_env())
    assert result.returncode == 0 and json.loads(result.stdout)


def test_docs_find_the_checks_that_read_a_setting():
    import toy_plugins
    from megaplug.cli._docs import _functions_by_setting

    found = _functions_by_setting(toy_plugins, {"hidden_size", "experts", "num_layers"})
    assert ("derive", "") in found["hidden_size"]
    assert ("validate", "") in found["experts"]


def test_list_is_cached_until_a_plugin_source_changes(toy_env, capsys, tmp_path, monkeypatch):
    directory = tmp_path / "plugins"
    directory.mkdir()
    plugin = directory / "listed_plugin.py"
    plugin.write_text("from toy_plugins import Core\n_core = Core()\n"
                      "megaplug_plugin = Core.megaplug_plugin\nadd_args = _core.add_args\n")
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.setenv("MEGAPLUG_PLUGINS", "listed_plugin")
    calls = []
    import megaplug.cli._main as cli

    real = cli._list_rows
    monkeypatch.setattr(cli, "_list_rows", lambda options: calls.append(1) or real(options))
    first = run(capsys, "list", "--json")[1]
    run(capsys, "list", "--json")  # a first import may add __pycache__ beside the plugin
    computed = len(calls)
    assert run(capsys, "list", "--json")[1] == first and len(calls) == computed
    rows = {row["name"]: row for row in json.loads(first)}
    assert rows["core"]["hooks"] == ["add_args"]
    plugin.write_text(plugin.read_text() + "raise ImportError('now broken')\n")
    os.utime(plugin, ns=(1, 1))  # a different mtime, whatever the clock's resolution
    from megaplug import _api

    _api._KERNELS.clear()
    sys.modules.pop("listed_plugin", None)
    rows = {row["name"]: row for row in json.loads(run(capsys, "list", "--json")[1])}
    assert len(calls) == computed + 1 and rows["listed_plugin"]["status"] == "broken"
