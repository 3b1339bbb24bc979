"""One conversion path: every source turns a raw value into a setting's type the same way.

The command line, config files, the environment, caller defaults and checkpoint arguments
all go through ``Kernel.convert``, so a value accepted (or refused) from one source is
accepted (or refused) from every other, and each problem names where the value came from.
"""

from __future__ import annotations

import argparse
import json

import pytest
from toy_plugins import Argparsey, Backend, Core

from megaplug import ConfigError, PluginInfo, Problem, hookimpl


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be positive")
    return value


class Typed:
    """A flag whose ``type=`` raises ArgumentTypeError, as argparse type functions do."""

    megaplug_plugin = PluginInfo(name="typed")

    @hookimpl
    def add_args(self, flags):
        flags.add_argument("--count", type=_positive, default=1, help="A positive count.")
        flags.add_argument("--preset", action="store_const", const="big", help="Big preset.")


@pytest.fixture
def kernel(make_kernel):
    return make_kernel(Core(), Argparsey(), Typed())


SOURCES = [("command-line", ""), ("config-file", "run.yaml"), ("caller-default", ""),
           ("checkpoint", "/ckpt")]


@pytest.mark.parametrize("source, detail", SOURCES)
def test_every_source_converts_alike(kernel, source, detail):
    assert kernel.convert("num_layers", "12", source=source, detail=detail) == 12
    assert kernel.convert("backend", "flash", source=source, detail=detail) is Backend.flash
    assert kernel.convert("sizes", ["1", "2"], source=source, detail=detail) == [1, 2]
    assert kernel.convert("count", "3", source=source, detail=detail) == 3


@pytest.mark.parametrize("source, detail, subject", [
    ("command-line", "", "--count: "),
    ("config-file", "run.yaml", "--count in config file run.yaml: "),
    ("caller-default", "", "count in the caller's defaults: "),
    ("checkpoint", "/ckpt", "count in the checkpoint arguments of /ckpt: "),
])
def test_an_argument_type_error_is_a_problem_naming_the_source(kernel, source, detail, subject):
    problem = kernel.convert("count", "0", source=source, detail=detail)
    assert isinstance(problem, Problem)
    assert problem.message == f"{subject}invalid _positive value '0' (must be positive)"
    assert problem.plugin == "typed" and problem.flags == ("--count",)
    assert problem.hint == "give --count a _positive value"


def test_loaded_values_must_fit_the_type(kernel):
    assert kernel.convert("num_layers", 4.0, source="config-file", detail="f") == 4
    assert "expected int, got 2.5" in kernel.convert("num_layers", 2.5).message
    assert "expected true or false" in kernel.convert("verbose", "yes").message
    assert kernel.convert("backend", Backend.fused) is Backend.fused
    invalid = kernel.convert("mode", "c", source="environment", detail="MODE")
    assert invalid.message == "environment variable MODE='c' is not valid: invalid choice 'c'"
    assert invalid.flags == ("MODE",) and invalid.hint == "choose from a, b"


def test_an_undeclared_name_comes_back_unchanged(kernel):
    marker = object()
    assert kernel.convert("not_a_setting", marker, source="caller-default") is marker


def test_argument_type_error_from_a_config_file_is_a_problem_not_a_crash(kernel, tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"count": 0}))
    with pytest.raises(ConfigError) as info:
        kernel.resolve([], config_files=[str(path)], environ={})
    assert [p.message for p in info.value.problems] == [
        f"--count in config file {path}: invalid _positive value 0 (must be positive)"]


def test_caller_defaults_are_converted_and_checked(kernel):
    resolved = kernel.resolve([], defaults={"hidden_size": "16", "extra_key": [1]}, environ={})
    assert resolved.hidden_size == 16 and resolved.extra_key == [1]
    with pytest.raises(ConfigError) as info:
        kernel.resolve([], defaults={"hidden_size": "wide"}, environ={})
    assert info.value.problems[0].message.startswith(
        "hidden_size in the caller's defaults: invalid int value 'wide'")


def test_an_unused_caller_default_is_still_checked(kernel):
    """A wrong default is the caller's bug wherever it would land, as a config file's value
    is checked when the command line overrides it."""
    resolved = kernel.resolve(["--hidden-size", "8"], defaults={"hidden_size": "16"},
                              environ={})
    assert resolved.hidden_size == 8
    with pytest.raises(ConfigError) as info:
        kernel.resolve(["--hidden-size", "8"], defaults={"hidden_size": "wide"}, environ={})
    assert [p.message.partition(":")[0] for p in info.value.problems] == [
        "hidden_size in the caller's defaults"]


def test_one_argparse_translation_keeps_const_and_choices(kernel):
    parser = argparse.ArgumentParser()
    for spec in kernel.table:
        if spec.kind == "flag":
            strings, kwargs = spec.argparse_call()
            parser.add_argument(*strings, **kwargs)
    parsed = parser.parse_args(["--backend", "flash", "--no-flip", "--tag", "x", "--sizes", "1",
                                "--preset"])
    assert parsed.preset == kernel.resolve(["--preset"], environ={}).preset == "big"
    assert parsed.backend is Backend.flash and parsed.flip is False
    assert parsed.tag == ["x"] and parsed.sizes == [1] and parsed.shuffle is True
    assert "{flash,fused,auto}" in kernel.parser().format_help()


def test_a_store_const_value_is_taken_as_loaded(kernel):
    """A loaded value for a store_const flag is not text: it stays the value it was."""
    assert kernel.convert("preset", 7, source="config") == 7
