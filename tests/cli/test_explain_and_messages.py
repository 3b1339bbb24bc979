"""explain on an invalid configuration, and one mistake, one message."""

from __future__ import annotations

import pytest

from cli_support import VALID, run

import megaplug


def test_explain_on_an_invalid_configuration_shows_value_provenance_and_its_problems(
        capsys, clean_env):
    code, out, err = run(capsys, "explain", "global_batch_size", "--", *VALID,
                         "--global-batch-size", "3", "--num-attention-heads", "7")
    assert code == 2
    lines = out.splitlines()
    assert "value:     3  (as far as resolution got: the configuration is invalid)" in lines
    assert lines[lines.index("provenance:") + 1] == "  - command line --global-batch-size"
    mine = lines[lines.index("problems involving global_batch_size:") + 1:]
    assert mine == [
        "  - [training] --global-batch-size 3 must be divisible by --micro-batch-size 2 x "
        "batch-parallel size 1 = 2 (evaluation batch sizes default to the training ones) "
        "(hint: use a batch size that is a multiple of 2 (such as 2 or 4), or "
        "--micro-batch-size 1)",
        "(1 other problem in the configuration: listed on stderr)"]
    assert "megaplug: 2 problems in the configuration:" in err
    assert "--hidden-size 64 is not divisible by --num-attention-heads 7" in err


def test_explain_a_derived_setting_of_an_invalid_configuration(capsys, clean_env):
    code, out, _ = run(capsys, "explain", "--ffn-hidden-size", "--", *VALID, "--lr", "-1",
                       "--min-lr", "0.5")
    assert code == 2
    assert "value:     256  (as far as resolution got" in out
    assert "  - derived by model from hidden_size" in out
    assert "problems involving ffn_hidden_size: none" in out


def test_explain_a_valid_configuration_is_unchanged(capsys, clean_env):
    code, out, err = run(capsys, "explain", "ffn_hidden_size", "--", *VALID)
    assert (code, err) == (0, "")
    assert "value:     256\n" in out and "problems involving" not in out


def test_explain_unknown_setting_suggests(capsys, clean_env):
    code, _, err = run(capsys, "explain", "ffn_hiden_size")
    assert code == 2 and "did you mean ffn_hidden_size?" in err


def _problems(*argv: str, config_files=()) -> list[str]:
    with pytest.raises(megaplug.ConfigError) as info:
        megaplug.resolve(list(argv), config_files=config_files, environ={})
    return [str(p) for p in info.value.problems]


def test_a_missing_config_file_is_one_problem(tmp_path):
    missing = str(tmp_path / "missing.yaml")
    assert _problems(config_files=[missing]) == [
        f"cannot read config file {missing}: No such file or directory "
        "(hint: check the path and the file's syntax)"]


def test_a_missing_config_file_keeps_problems_of_what_the_command_line_settled(tmp_path):
    found = _problems("--hidden-size", "60", "--num-attention-heads", "7",
                      config_files=[str(tmp_path / "missing.yaml")])
    assert len(found) == 2 and found[0].startswith("cannot read config file")
    assert found[1].startswith("[model] --hidden-size 60 is not divisible by "
                               "--num-attention-heads 7")


def test_a_bad_value_is_not_also_reported_as_missing():
    found = _problems(*VALID[:-2], "--micro-batch-size", "x")
    assert found == ["[training] --micro-batch-size: invalid int value 'x' (invalid literal for "
                     "int() with base 10: 'x') (hint: give --micro-batch-size an int value)"]


def test_a_misspelt_flag_is_not_also_reported_as_missing():
    argv = [t if t != "--hidden-size" else "--hiden-size" for t in VALID]
    assert _problems(*argv) == [
        "unrecognized argument --hiden-size in command line (hint: did you mean --hidden-size?)"]


def test_a_flag_without_its_value_is_one_problem():
    argv = [*VALID[:1], *VALID[2:], "--num-layers"]
    assert _problems(*argv) == [
        "command line: argument --num-layers: expected one argument "
        "(hint: megaplug flags WORD lists the accepted flags and what they take)"]


def test_train_iters_with_train_samples_is_one_problem():
    found = _problems(*VALID, "--train-iters", "10", "--train-samples", "100")
    assert found == [
        "[training] --train-iters sets iteration-based training, which cannot be combined "
        "with --train-samples (hint: count everything in iterations (--lr-decay-iters, "
        "--lr-warmup-iters), or train by samples with --train-samples instead)"]


def test_independent_problems_are_all_still_reported():
    found = _problems(*VALID, "--micro-batch-size", "x", "--num-attention-heads", "7")
    assert len(found) == 2 and "--micro-batch-size: invalid int value" in found[0]
    assert "--num-attention-heads 7" in found[1]


def test_config_file_bad_value_hides_its_knock_ons(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("micro_batch_size: lots\n")
    found = _problems(*VALID[:-2], config_files=[str(config)])
    assert found == [f"[training] --micro-batch-size in config file {config}: invalid int value "
                     "'lots' (invalid literal for int() with base 10: 'lots') (hint: give "
                     "--micro-batch-size an int value)"]
