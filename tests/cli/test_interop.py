"""``megaplug export`` / ``import`` and config files in another program's format: what the
command line does itself, whatever distribution provides the formats (the formats' own
behaviour is tested with them: plugins/megaplug-bridge/tests)."""

from __future__ import annotations

from cli_support import VALID, run


def test_a_config_file_in_a_format_no_reader_knows_is_named(capsys, tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("_target_: some.program.Config\nnum_layers: 2\n")
    code, out, err = run(capsys, "resolve", "--config", str(path), "--", *VALID)
    assert (code, out) == (2, "")
    assert "'some.program.Config'" in err and "megaplug.config_formats" in err


def test_a_plain_config_file_is_read_as_settings(capsys, tmp_path):
    path = tmp_path / "plain.yaml"
    path.write_text("num_layers: 3\n")
    code, out, _ = run(capsys, "explain", "num_layers", "--config", str(path), "--", *VALID[2:])
    assert code == 0 and "value:     3" in out


def test_an_unknown_export_format_lists_the_installed_ones(capsys):
    code, _, err = run(capsys, "export", "--to", "no-such-format", "--", *VALID)
    assert code == 2
    assert "no format 'no-such-format'" in err and "megaplug.export" in err


def test_an_unknown_import_format_lists_the_installed_ones(capsys, tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("a: 1\n")
    code, _, err = run(capsys, "import", "no-such-format", str(path))
    assert code == 2 and "no format 'no-such-format'" in err and "megaplug.import" in err


def test_export_and_import_are_commands_with_help(capsys):
    for command in ("export", "import"):
        try:
            run(capsys, command, "--help")
        except SystemExit as exit_:
            assert exit_.code == 0
        out, _ = capsys.readouterr()
        assert f"usage: megaplug {command}" in out
