"""Every command agrees on the Megatron release in force and says where it came from: a
version megaplug cannot target is refused by the commands that show a line's flags as by a
resolve, listed by ``list`` (text and JSON alike), and ``--assume`` reads a Megatron version
as the release lines do."""

from __future__ import annotations

import json

import pytest

from cli_support import VALID, run

OLD = "megatron_core=0.12.9"
PROBLEM = ("megatron_core 0.12.9 (as stated) is older than megaplug supports "
           "(supported: megatron_core 0.13.0 to 0.19.2, main (0.20.0) or seed)")


@pytest.mark.parametrize("command", [("flags", "num-experts"), ("flags", "--json"),
                                     ("schema",), ("completion", "bash"), ("docs",)])
def test_a_command_showing_a_lines_flags_refuses_an_unsupported_version(capsys, clean_env,
                                                                        tmp_path, command):
    extra = ("--out", str(tmp_path / "pages")) if command == ("docs",) else ()
    code, out, err = run(capsys, *command, *extra, "--assume", OLD)
    assert (code, out) == (2, "")
    assert f"  - {PROBLEM} (hint: state a supported version with --assume " \
           "megatron_core=VERSION)" in err
    assert not (tmp_path / "pages").exists()


def test_a_resolve_reports_the_same_problem(capsys, clean_env):
    code, _, err = run(capsys, "resolve", "--assume", OLD, "--", *VALID)
    assert code == 2
    assert PROBLEM in err


def test_list_shows_the_problem_in_text_as_in_json(capsys, clean_env):
    code, out, _ = run(capsys, "list", "--assume", OLD)
    assert code == 0
    assert "target Megatron: seed (megatron_core 0.12.9, as stated)\n" \
           f"problem: {PROBLEM}\n" in out
    code, out, _ = run(capsys, "list", "--json", "--assume", OLD)
    assert code == 0
    assert {row["target_megatron"]["problem"] for row in json.loads(out)} == {PROBLEM}


def test_a_newer_version_is_a_warning_everywhere(capsys, clean_env):
    warning = "megatron_core 0.25.0 (as stated) is newer than any release megaplug knows"
    code, out, err = run(capsys, "flags", "num-experts", "--assume", "megatron_core=0.25.0")
    assert code == 0 and "--num-experts" in out
    assert err.startswith(f"megaplug: warning: {warning}")
    code, out, _ = run(capsys, "list", "--assume", "megatron_core=0.25.0")
    assert f"\nwarning: {warning}" in out


@pytest.mark.parametrize("version", ["1", "7", "0", "10"])
def test_assume_refuses_what_the_release_lines_cannot_read(capsys, clean_env, version):
    for command in (("list",), ("flags", "lr"), ("resolve", "--", *VALID)):
        code, out, err = run(capsys, command[0], "--assume", f"megatron_core={version}",
                             *command[1:])
        assert (code, out) == (2, ""), command
        assert f"--assume 'megatron_core={version}': megatron_core {version!r} (as stated) " \
               "is not a version" in err


@pytest.mark.parametrize("version,release", [
    ("0.17", "0.17.0 (megatron_core 0.17, as stated)"),
    ("0.17.1rc0", "0.17.1 (megatron_core 0.17.1rc0, as stated; a pre-release of 0.17.1"),
    ("0.19.2+local", "0.19.2 (megatron_core 0.19.2+local, as stated; a local build of 0.19.2"),
    ("0.16.7", "0.16.1 (megatron_core 0.16.7, as stated; "),
    ("main", "main ")])
def test_assume_takes_what_the_releases_read(capsys, clean_env, version, release):
    code, out, _ = run(capsys, "list", "--assume", f"megatron_core={version}")
    assert code == 0
    assert f"target Megatron: {release}" in out
