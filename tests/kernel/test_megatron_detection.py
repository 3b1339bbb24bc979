"""Finding the installed megatron-core and its version without importing it
(``megaplug.environment._detection``): every layout the real wheels and checkouts have,
and every file that cannot be read a problem, never a traceback or a hang."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import megaplug
from megaplug import ConfigError, TargetEnvironment
from megaplug.environment import _detection
from megaplug.testing import MINIMAL_ARGV


@pytest.fixture()
def on_path(monkeypatch):
    """Put directories first on ``sys.path``, with nothing of Megatron imported."""
    _detection.forget_local_megatron()
    for name in ("megatron", "megatron.core", "megatron.core.package_info"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    def put(*directories: Path) -> None:
        monkeypatch.setattr(sys, "path", [*map(str, directories), *sys.path])
        _detection.forget_local_megatron()

    yield put
    _detection.forget_local_megatron()


def wheel_layout(site: Path, version: str | None, package_info: bytes | None = None,
                 regular: bool = False) -> Path:
    """megatron-core as its wheels install it (0.14.0 and 0.19.2 looked at): ``megatron``
    a namespace package (no ``__init__.py``), ``megatron/core`` a package, the dist-info
    directory beside ``megatron``. ``regular`` adds ``megatron/__init__.py``."""
    core = site / "megatron" / "core"
    core.mkdir(parents=True)
    (core / "__init__.py").write_text("")
    if regular:
        (site / "megatron" / "__init__.py").write_text("")
    if package_info is not None:
        (core / "package_info.py").write_bytes(package_info)
    if version is not None:
        (site / f"megatron_core-{version}.dist-info").mkdir()
        (site / f"megatron_core-{version}.dist-info" / "METADATA").write_text(
            f"Name: megatron-core\nVersion: {version}\n")
    return core


def info(major: int, minor: int, patch: int, extra: bytes = b"") -> bytes:
    return f"MAJOR = {major}\nMINOR = {minor}\nPATCH = {patch}\n".encode() + extra


@pytest.mark.parametrize("version,release", [("0.19.2", "0.19.2"), ("0.14.0", "0.14.0"),
                                             ("0.13.1", "0.13.1"), ("0.16.3", "0.16.1")])
def test_a_wheel_whose_megatron_is_a_namespace_package_is_found(on_path, tmp_path, version,
                                                                 release):
    wheel_layout(tmp_path, version, info(0, 0, 0))
    on_path(tmp_path)
    choice = TargetEnvironment().line_choice()
    assert (choice.line, choice.version, choice.source) == (release, version,
                                                            "installed megatron-core")


def test_a_source_checkout_without_megatron_init_reads_package_info(on_path, tmp_path):
    wheel_layout(tmp_path, None, info(0, 17, 1))  # Megatron-LM's tree has no megatron/__init__
    on_path(tmp_path)
    choice = TargetEnvironment().line_choice()
    assert (choice.line, choice.version) == ("0.17.1", "0.17.1")
    assert choice.source == f"megatron.core's package_info in {tmp_path / 'megatron'}"


def test_namespace_portions_give_core_from_the_first_that_has_it(on_path, tmp_path):
    # megatron-bridge style: another distribution's megatron/ portion comes first
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "megatron" / "bridge").mkdir(parents=True)
    wheel_layout(second, "0.16.1")
    on_path(first, second)
    assert TargetEnvironment().line_choice().version == "0.16.1"


def test_a_regular_package_later_on_the_path_wins_over_namespace_portions(on_path, tmp_path):
    # the import system takes a regular package wherever it is on the path
    first, second = tmp_path / "a", tmp_path / "b"
    wheel_layout(first, "0.16.1")
    wheel_layout(second, "0.18.0", regular=True)
    on_path(first, second)
    assert TargetEnvironment().line_choice().version == "0.18.0"


def test_a_module_named_megatron_is_not_megatron_core(on_path, tmp_path):
    (tmp_path / "megatron.py").write_text("")
    on_path(tmp_path)
    choice = TargetEnvironment().line_choice()
    assert (choice.version, choice.problem) == (None, None)
    assert "is a module named megatron" in choice.source


@pytest.mark.parametrize("extra", [b"# caf\xe9 \xff\xfe\n", b"\x80\x81\x82\n", b"\xef\xbb\xbf"])
def test_bytes_that_are_not_utf8_do_not_stop_the_version(on_path, tmp_path, extra):
    wheel_layout(tmp_path, None, extra + info(0, 15, 3, extra))
    on_path(tmp_path)
    assert TargetEnvironment().line_choice().version == "0.15.3"


def test_a_package_info_without_numbers_is_no_version(on_path, tmp_path):
    wheel_layout(tmp_path, None, b"MAJOR = 0\nMINOR = x\nPATCH = 1\n")
    on_path(tmp_path)
    choice = TargetEnvironment().line_choice()
    assert (choice.line, choice.version, choice.problem) == ("seed", None, None)
    assert choice.source.startswith("megatron importable here, without a version")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_as_package_info_is_a_problem_not_a_hang(on_path, tmp_path):
    core = wheel_layout(tmp_path, None)
    os.mkfifo(core / "package_info.py")  # opened blocking, this would wait for a writer
    on_path(tmp_path)
    choice = TargetEnvironment().line_choice()
    assert choice.problem == (f"megatron-core's version cannot be read: "
                              f"{core / 'package_info.py'} is not a regular file")
    with pytest.raises(ConfigError) as error:
        megaplug.resolve(MINIMAL_ARGV, environ={})
    assert choice.problem in [problem.message for problem in error.value.problems]


def test_a_directory_as_package_info_is_no_version(on_path, tmp_path):
    core = wheel_layout(tmp_path, None)
    (core / "package_info.py").mkdir()
    on_path(tmp_path)
    assert TargetEnvironment().line_choice().problem is None


def test_a_huge_package_info_is_a_problem(on_path, tmp_path):
    core = wheel_layout(tmp_path, None)
    with open(core / "package_info.py", "wb") as handle:
        handle.truncate((1 << 20) + 10)
    on_path(tmp_path)
    assert "holds more than" in TargetEnvironment().line_choice().problem


def test_a_stated_version_is_never_looked_up(on_path, tmp_path):
    core = wheel_layout(tmp_path, None)
    os.mkfifo(core / "package_info.py")
    on_path(tmp_path)
    choice = TargetEnvironment(packages={"megatron_core": "0.17.1"}).line_choice()
    assert (choice.line, choice.problem) == ("0.17.1", None)


@pytest.mark.parametrize("version", [0.17, 17, b"0.17", ["0.17"]])
def test_a_version_that_is_not_text_is_a_type_error(version):
    with pytest.raises(TypeError, match=r"packages\['megatron_core'\] is .*a version is text"):
        TargetEnvironment(packages={"megatron_core": version})


def test_a_package_name_that_is_not_text_is_a_type_error():
    with pytest.raises(TypeError, match="not an import name"):
        TargetEnvironment(packages={1: "0.17.1"})
