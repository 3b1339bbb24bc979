"""Issue 31, class 7: installed metadata. Whatever another distribution's metadata holds --
another encoding, a FIFO, a device, a huge file -- no command crashes or hangs; an entry
point that cannot be loaded because its name is taken is reported, not dropped; the
``module [extra]`` form loads as importlib.metadata loads it; a hand-edited entry-point
cache makes megaplug import nothing it names; what a plugin prints as it is imported never
lands in a command's answer on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from megaplug import _api
from megaplug.cache import _entry_points
from megaplug.cli import main

VALID = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2"]


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A directory on sys.path (first) for fake distributions; a private cache; the
    process's entry-point memo forgotten before and after."""
    directory = tmp_path / "site"
    directory.mkdir()
    monkeypatch.syspath_prepend(str(directory))
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MEGAPLUG_DISABLE", "MEGAPLUG_PLUGINS",
                 "MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_api, "_KERNELS", {})  # kernels of this process, made without it
    _entry_points.forget()
    yield directory
    _entry_points.forget()
    for name in [module for module in sys.modules if module.startswith("round3_")]:
        del sys.modules[name]


def distribution(site: Path, name: str, entry_points: bytes | None) -> Path:
    path = site / f"{name}-1.0.dist-info"
    path.mkdir()
    (path / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n")
    if entry_points is not None:
        (path / "entry_points.txt").write_bytes(entry_points)
    return path


def megaplug(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_a_latin_1_file_without_megaplug_entry_points_changes_nothing(site, capsys):
    distribution(site, "latin", b"[console_scripts]\ncaf\xe9 = latin:main\n")
    code, out, err = megaplug(capsys, "resolve", "--", *VALID)
    assert code == 0, err
    assert json.loads(out)["num_layers"] == 2


def test_a_megaplug_section_that_is_not_utf_8_is_a_broken_plugin(site, capsys):
    distribution(site, "latin", b"[megaplug]\ncaf\xe9 = latin:plugin\n")
    code, out, _err = megaplug(capsys, "list")
    assert code == 0
    assert "latin          broken" in out
    assert "entry_points.txt cannot be read: its [megaplug] section is not UTF-8 text" in out
    code, _out, err = megaplug(capsys, "resolve", "--", *VALID)
    assert code == 2
    assert "block it with -p no:latin" in err
    code, _out, err = megaplug(capsys, "resolve", "-p", "no:latin", "--", *VALID)
    assert code == 0, err


@pytest.mark.parametrize("kind", ["fifo", "device", "huge", "directory", "fifo METADATA"])
def test_a_metadata_file_that_is_no_regular_file_neither_hangs_nor_crashes(tmp_path, kind):
    site = tmp_path / "site"
    site.mkdir()
    path = distribution(site, "odd", None)
    target = path / "entry_points.txt"
    if kind == "fifo METADATA":
        target.write_text("[megaplug]\nodd = odd_plugin\n")
        (path / "METADATA").unlink()
        os.mkfifo(path / "METADATA")
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "device":
        target.symlink_to("/dev/zero")
    elif kind == "huge":
        target.write_bytes(b"[console_scripts]\n" + b"# padding\n" * 300_000)
    else:
        target.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get(
        "PYTHONPATH", "")]), "MEGAPLUG_CACHE_DIR": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, "-m", "megaplug", "list"], capture_output=True,
                            text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "moe            active" in result.stdout  # the rest is read
    if kind == "directory":
        assert "odd" not in result.stdout  # no entry points, as importlib.metadata finds
    else:
        assert "odd            broken" in result.stdout


def test_an_entry_point_named_like_a_built_in_is_reported(site, capsys):
    distribution(site, "clash", b"[megaplug]\nmodel = round3_clash\n")
    (site / "round3_clash.py").write_text("")
    code, _out, err = megaplug(capsys, "resolve", "--", *VALID)
    assert code == 2
    assert ("entry point 'model' of distribution clash (model = round3_clash) is not loaded: "
            "plugin 'model' (distribution megaplug) already has that name") in err
    assert "rename the entry point, or uninstall clash" in err


def test_a_second_distribution_with_the_same_entry_point_name_is_reported(site, capsys):
    distribution(site, "first", b"[megaplug]\nround3 = round3_first\n")
    distribution(site, "second", b"[megaplug]\nround3 = round3_second\n")
    for name in ("first", "second"):
        (site / f"round3_{name}.py").write_text("")
    code, out, _err = megaplug(capsys, "list")
    assert code == 0
    # which comes first is the directory's listing order, as for importlib.metadata
    problems = [line for line in out.splitlines() if "already has that name" in line]
    assert len(problems) == 1
    loaded, dropped = ("first", "second") if "of distribution second" in problems[0] else (
        "second", "first")
    assert problems[0].startswith(
        f"problem: entry point 'round3' of distribution {dropped} (round3 = round3_{dropped}) "
        f"is not loaded: plugin 'round3' (entry point round3 = round3_{loaded}, distribution "
        f"{loaded}) already has that name")


@pytest.mark.parametrize("value", ["round3_extras [fast]", "round3_extras:megaplug_plugin "
                                   "[fast, small]", "round3_extras[fast]"])
def test_the_module_extras_form_loads(site, capsys, value):
    from importlib.metadata import EntryPoint

    distribution(site, "extras", f"[megaplug]\nround3 = {value}\n".encode())
    (site / "round3_extras.py").write_text(
        "from megaplug import PluginInfo\nmegaplug_plugin = PluginInfo(name='round3')\n")
    assert EntryPoint("round3", value, "megaplug").module == "round3_extras"
    code, out, _err = megaplug(capsys, "list")
    assert code == 0
    assert "round3         active" in out


def _cache_file(tmp_path: Path) -> Path:
    (found,) = (tmp_path / "cache").glob("entry-points-*.json")
    return found


@pytest.mark.parametrize("edit", ["value", "source elsewhere", "new row"])
def test_a_hand_edited_entry_point_cache_imports_nothing_it_names(site, tmp_path, edit):
    distribution(site, "honest", b"[megaplug]\nround3 = round3_honest\n")
    (site / "round3_honest.py").write_text("")
    marker = tmp_path / "imported"
    (site / "round3_planted.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    real = [point.to_dict() for point in _entry_points.entry_points()]
    cache = _cache_file(tmp_path)
    stored = json.loads(cache.read_text())
    honest = next(row for row in stored["value"] if row["name"] == "round3")
    if edit == "value":
        honest["value"] = "round3_planted"
    elif edit == "source elsewhere":
        elsewhere = tmp_path / "elsewhere" / "planted-1.0.dist-info"
        elsewhere.mkdir(parents=True)
        (elsewhere / "entry_points.txt").write_text("[megaplug]\nround3 = round3_planted\n")
        honest.update(value="round3_planted", source=str(elsewhere / "entry_points.txt"))
    else:
        stored["value"].append({**honest, "name": "planted", "value": "round3_planted"})
    cache.write_text(json.dumps(stored))
    _entry_points.forget()
    assert [point.to_dict() for point in _entry_points.entry_points()] == real
    main(["list"])
    assert not marker.exists()


@pytest.mark.parametrize("how", ["entry point", "-p module"])
def test_what_a_plugin_prints_at_import_goes_to_stderr(site, capsys, how):
    (site / "round3_noisy.py").write_text(
        "print('hello from round3_noisy')\nfrom megaplug import PluginInfo\n"
        "megaplug_plugin = PluginInfo(name='round3_noisy')\n")
    argv = ["resolve", "--", *VALID]
    if how == "entry point":
        distribution(site, "noisy", b"[megaplug]\nround3_noisy = round3_noisy\n")
    else:
        argv = ["resolve", "-p", "round3_noisy", "--", *VALID]
    code, out, err = megaplug(capsys, *argv)
    assert code == 0, err
    assert json.loads(out)["num_layers"] == 2
    assert "hello from round3_noisy" in err
    assert sys.stdout is not sys.stderr  # put back


LOUD = """
import sys
from megaplug import PluginInfo, hookimpl

megaplug_plugin = PluginInfo(name="round3_loud")


@hookimpl
def add_args(flags):
    print("declaring round3_loud")


@hookimpl
def validate(config):
    print("validating with round3_loud")
"""


@pytest.mark.parametrize("command", [["resolve", "--"], ["resolve", "--format", "yaml", "--"],
                                     ["diff", "--json", "{config}", "{config}", "--"]])
def test_what_a_plugin_prints_in_its_hooks_goes_to_stderr(site, capsys, tmp_path, command):
    import yaml

    (site / "round3_loud.py").write_text(LOUD)
    config = tmp_path / "c.yaml"
    config.write_text("hidden_size: 64\n")
    argv = [token.replace("{config}", str(config)) for token in command]
    code, out, err = megaplug(capsys, argv[0], "-p", "round3_loud", *argv[1:], *VALID)
    assert code == 0, err
    assert (yaml.safe_load if "yaml" in argv else json.loads)(out)  # the answer, parsed
    assert "declaring round3_loud" in err and "validating with round3_loud" in err


def test_the_training_flags_help_is_still_the_answer(site, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["resolve", "--", "--help"])
    out, _err = capsys.readouterr()
    assert exit_info.value.code == 0
    assert out.startswith("usage: megaplug ") and "--num-layers" in out
