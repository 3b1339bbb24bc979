"""Issue 31, class 11: the Python API takes copies and odd arguments cleanly.

A :class:`megaplug.Resolved` pickles and deep-copies with its values and provenance (a
``copy.copy`` is the read-only object itself); ``argv`` items and ``config_files`` that are
paths work, and anything else that is not text is a ``TypeError`` naming it -- never an
``AttributeError`` from inside megaplug.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path

import pytest

import megaplug
from megaplug._config import Provenance

from reliability_support import MINIMAL, resolve_environment


def resolved(*extra: str) -> megaplug.Resolved:
    with resolve_environment():
        return megaplug.resolve([*MINIMAL, "--swiglu", "--exit-signal", "SIGUSR1",
                                 "--window-size", "128,0", *extra], environ={})


COPIES = {"pickle": lambda r: pickle.loads(pickle.dumps(r)),
          "pickle protocol 0": lambda r: pickle.loads(pickle.dumps(r, protocol=0)),
          "deepcopy": copy.deepcopy}


@pytest.mark.parametrize("kind", COPIES)
def test_a_resolved_configuration_copies_with_values_and_provenance(kind):
    original = resolved()
    again = COPIES[kind](original)
    assert type(again) is megaplug.Resolved and again is not original
    assert again.to_dict() == original.to_dict()
    assert dict(again.provenance()) == dict(original.provenance())
    for name in original:
        assert again.source(name).history() == original.source(name).history()
        assert again.source(name).describe() == original.source(name).describe()
    assert again.source("ffn_hidden_size").source == "derived"
    assert again.given_values() == original.given_values()
    assert again.warnings == original.warnings and again.plugins == original.plugins
    assert again.options("model").swiglu is True
    with pytest.raises(megaplug.ReadOnlyError if hasattr(megaplug, "ReadOnlyError")
                       else AttributeError):
        again.num_layers = 3  # type: ignore[misc]


def test_a_deep_copy_shares_no_list_with_the_original():
    original = resolved("--data-path", "a", "b")
    again = copy.deepcopy(original)
    assert again.data_path == original.data_path
    assert again.data_path is not original.data_path


def test_a_shallow_copy_is_the_read_only_object_itself():
    original = resolved()
    assert copy.copy(original) is original


def test_provenance_records_pickle_and_copy_by_field():
    record = resolved().source("ffn_hidden_size")
    for again in (pickle.loads(pickle.dumps(record)), copy.deepcopy(record), copy.copy(record)):
        assert isinstance(again, Provenance)
        assert again == record and again.history() == record.history()
        with pytest.raises(AttributeError, match="immutable"):
            again.source = "x"  # type: ignore[misc]


def test_paths_work_as_config_files_and_argv_items(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 7\n")
    with resolve_environment():
        assert megaplug.resolve(MINIMAL, config_files=[path], environ={}).seed == 7
        assert megaplug.resolve([*MINIMAL, "--config", path], environ={}).seed == 7
        saved = megaplug.resolve([*MINIMAL, "--save", tmp_path, "--save-interval", "5"],
                                 environ={})
    assert saved.save == str(tmp_path)


@pytest.mark.parametrize("argv, message", [
    ([*MINIMAL, "--seed", 4], "argv[17] is 4, a int; every item must be a str (or a path)"),
    ([*MINIMAL, None], "argv[16] is None, a NoneType"),
    ([*MINIMAL, b"--fp16"], "argv[16] is b'--fp16', a bytes"),
    ("--num-layers 2", "argv must be a list of str, not one str ('--num-layers 2')"),
])
def test_argv_items_that_are_not_text_are_a_type_error_naming_them(argv, message):
    with resolve_environment(), pytest.raises(TypeError) as caught:
        megaplug.resolve(argv, environ={})
    assert message in str(caught.value)


@pytest.mark.parametrize("files, message", [
    ("c.yaml", "config_files must be a list of str, not one str ('c.yaml')"),
    ([3], "config_files[0] is 3, a int"),
])
def test_config_files_that_are_not_paths_are_a_type_error(files, message):
    with resolve_environment(), pytest.raises(TypeError) as caught:
        megaplug.resolve(MINIMAL, config_files=files, environ={})
    assert message in str(caught.value)


def test_no_config_files_may_be_none_and_defaults_must_be_a_mapping():
    with resolve_environment():
        assert megaplug.resolve(MINIMAL, config_files=None, environ={}).num_layers == 2
        with pytest.raises(TypeError, match="defaults must be a mapping of settings, not list"):
            megaplug.resolve(MINIMAL, defaults=[("seed", 3)], environ={})  # type: ignore


def test_the_facade_takes_the_same_arguments(tmp_path):
    from megaplug.megatron import parse_args

    path = tmp_path / "c.yaml"
    path.write_text("seed: 7\n")
    assert parse_args(argv=[*MINIMAL, "--config", path], environ={}).seed == 7
    with pytest.raises(TypeError, match=r"argv\[17\] is 4"):
        parse_args(argv=[*MINIMAL, "--seed", 4], environ={})


def test_a_path_in_config_files_reads_the_file_as_its_text_would(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("seed: 7\n")
    with resolve_environment():
        by_path = megaplug.resolve(MINIMAL, config_files=[path], environ={})
        by_text = megaplug.resolve(MINIMAL, config_files=[str(path)], environ={})
    assert by_path.source("seed") == by_text.source("seed")
    assert Path(by_path.source("seed").detail) == path


def test_errors_pickle_with_their_problems():
    """A worker's error sent to its parent (multiprocessing, torch elastic) keeps every
    problem; the facade's leaves its partial draft behind."""
    from megaplug.megatron import ConfigError as FacadeError, UsageError, parse_and_validate_args

    with resolve_environment():
        with pytest.raises(megaplug.ConfigError) as plain:
            megaplug.resolve([*MINIMAL, "--fp16", "--bf16"], environ={})
        with pytest.raises(FacadeError) as facade:
            parse_and_validate_args(argv=[*MINIMAL, "--fp16", "--bf16"], environ={},
                                    torch_types=False, register=False)
        with pytest.raises(UsageError) as usage:
            parse_and_validate_args(argv=[*MINIMAL, "--bogus"], environ={},
                                    torch_types=False, register=False)
    for error in (plain.value, facade.value, usage.value):
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert again.problems == error.problems and again.warnings == error.warnings
    assert facade.value.partial is not None
    assert pickle.loads(pickle.dumps(facade.value)).partial is None
    assert pickle.loads(pickle.dumps(usage.value)).code == usage.value.code
