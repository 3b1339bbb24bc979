"""docs/plugin-packaging.md works when followed literally, and megaplug.testing helps."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import megaplug
from megaplug.testing import MINIMAL_ARGV, minimal_argv, problems, resolve

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin-packaging.md"


def documented_files() -> dict[str, str]:
    """The page's code blocks that start with '# file: PATH', by path."""
    blocks = re.findall(r"```(?:toml|python)\n# file: (\S+)\n(.*?)```", DOC.read_text(), re.S)
    return {path: f"# file: {path}\n{body}" for path, body in blocks}


def test_the_page_holds_a_complete_distribution():
    assert sorted(documented_files()) == ["pyproject.toml", "src/megaplug_tokens/__init__.py",
                                          "tests/test_tokens.py"]


def test_the_documented_distribution_builds_with_its_entry_point_and_its_tests_pass(tmp_path):
    for path, text in documented_files().items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
         "--quiet", "-w", "dist"], cwd=tmp_path, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("megaplug_tokens-0.1.0-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = archive.read("megaplug_tokens-0.1.0.dist-info/entry_points.txt").decode()
    assert "megaplug_tokens/__init__.py" in names
    assert "[megaplug]\ntokens = megaplug_tokens" in entry_points
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=tmp_path, capture_output=True, text=True,
        env={"PYTHONPATH": str(tmp_path / "src"), "PATH": "/usr/bin:/bin",
             "RANK": "5", "WORLD_SIZE": "2", "MEGAPLUG_DISABLE": "training"})
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "4 passed" in tested.stdout


def test_minimal_argv_is_valid_with_every_installed_plugin():
    config = resolve()
    assert (config.num_layers, config.hidden_size, config.micro_batch_size) == (2, 64, 1)
    assert minimal_argv("--hidden-size", "128") == [*MINIMAL_ARGV, "--hidden-size", "128"]
    assert resolve("--hidden-size", "128").hidden_size == 128


def test_the_callers_environment_does_not_leak_in(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "2")  # RANK 3 is not below WORLD_SIZE 2: invalid
    monkeypatch.setenv("MEGAPLUG_DISABLE", "model")
    assert problems() == []
    assert resolve().data_parallel_size == 1
    assert resolve(environ={"WORLD_SIZE": "4", "RANK": "0"}).data_parallel_size == 4


def test_problems_lists_every_problem_and_resolve_raises():
    found = problems("--micro-batch-size", "0", "--hidden-size", "60",
                     "--num-attention-heads", "7")
    assert sorted(p.plugin for p in found) == ["model", "training"]
    with pytest.raises(megaplug.ConfigError):
        resolve("--micro-batch-size", "0")


def test_a_plugin_module_can_be_passed_directly():
    import types

    plugin = types.ModuleType("direct_plugin")
    plugin.megaplug_plugin = megaplug.PluginInfo(name="direct")

    @megaplug.hookimpl
    def add_args(flags):
        flags.add_argument("--direct-flag", type=int, default=3)

    plugin.add_args = add_args
    assert resolve("--direct-flag", "5", plugins=[plugin]).direct_flag == 5
