"""The switch takes the entry script's own flags (issue 31, class 9).

Flags an entry script declares (its ``extra_args_provider``) are the script's: its
``-p/--port`` is no plugin to load and its ``--config`` no megaplug settings file; its
``--help`` lists them beside Megatron's; ``parse_args(ignore_unknown_args=True)`` ignores
another program's ``-p NAME`` (pytest's ``-p xdist``); and the switch without Megatron says so
in one line. The Megatron tier runs the same through the switch on Megatron's code
(tests/megatron/test_switch_in_a_job.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from megaplug.megatron import UsageError, parse_args, resolution_warnings, validate_args

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4"]
#: The example's third-party plugin, where installed, is blocked by the environment here:
#: a ``-p no:lora`` would be the script's --port.
ENV = {"RANK": "0", "WORLD_SIZE": "1", "MEGAPLUG_DISABLE": "lora"}


def server_flags(parser):
    group = parser.add_argument_group(title="server")
    group.add_argument("-p", "--port", type=int, default=80, help="the port to serve on")
    group.add_argument("--config", default=None, help="the server's own config file")
    return parser


@pytest.mark.parametrize("tokens", [["-p", "8080"], ["--port", "8080"], ["-p8080"],
                                    ["--port=8080"]])
def test_the_scripts_port_is_no_plugin_and_its_config_no_settings_file(tokens, tmp_path):
    missing = str(tmp_path / "x.yaml")  # megaplug would fail reading it; the script takes it
    args = parse_args(server_flags, argv=[*tokens, "--config", missing, *BASE], environ=ENV)
    assert (args.port, args.config) == (8080, missing)
    validate_args(args, environ=ENV, torch_types=False)
    assert args.num_layers == 2


def long_port_only(parser):
    parser.add_argument("--port", type=int, default=80)
    return parser


def test_where_the_script_declares_no_p_it_still_selects_plugins():
    args = parse_args(long_port_only, argv=[*BASE, "--port", "1", "-p", "no:moe"], environ=ENV)
    assert args.port == 1
    assert not hasattr(args, "num_experts")  # the moe plugin was blocked
    # a name no environment installs: pytest's own plugins (xdist) may be importable here
    with pytest.raises(UsageError, match="plugin 'megaplug_no_such_plugin'"):
        parse_args(argv=[*BASE, "-p", "megaplug_no_such_plugin"], environ=ENV)


def test_help_lists_the_scripts_flags_beside_megatrons(capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(server_flags, argv=[*BASE, "--help"], environ=ENV)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "-p PORT, --port PORT" in out and "the port to serve on" in out
    assert "--num-layers NUM_LAYERS" in out and "server:" in out


@pytest.mark.parametrize("tokens", [["-p", "xdist"], ["-pxdist"], ["-p", "no:cacheprovider"],
                                    ["-p", "pytest_cov", "-p", "no:randomly"]])
def test_ignore_unknown_args_ignores_another_programs_plugins(tokens):
    args = parse_args(ignore_unknown_args=True, argv=[*tokens, *BASE, "-q", "tests"],
                      environ=ENV)
    validate_args(args, environ=ENV, torch_types=False)
    assert args.num_layers == 2
    ignored = [str(w) for w in resolution_warnings(args)]
    assert ignored and all("ignored (ignore_unknown_args)" in w for w in ignored)


def test_ignore_unknown_args_keeps_megaplugs_own_plugin_selection():
    args = parse_args(ignore_unknown_args=True, argv=[*BASE, "-p", "no:moe", "-p", "xdist"],
                      environ=ENV)
    assert not hasattr(args, "num_experts")


def test_the_switch_without_megatron_says_so_in_one_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("raise SystemExit('never run')\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    completed = subprocess.run([sys.executable, "-m", "megaplug.megatron", str(script),
                                "--num-layers", "2"], capture_output=True, text=True,
                               cwd=tmp_path, env=env, timeout=120)
    if "cannot import" not in completed.stderr:
        pytest.skip("megatron is importable here")
    assert completed.returncode == 2
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr
    assert completed.stderr.startswith(
        "megaplug.megatron: cannot import megatron.training.arguments (No module named")
    assert Path(script).read_text()  # untouched
