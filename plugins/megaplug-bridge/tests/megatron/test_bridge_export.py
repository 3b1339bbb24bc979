"""``export --to bridge`` judged by Megatron-Bridge's own code, on every shared parity case
and mutation megatron-core 0.19.2 accepts (with Megatron's NullTokenizer of a stated size:
Bridge's container always has a model, which needs the vocabulary):

* ``ConfigContainer.from_yaml(..., STRICT)`` loads the export;
* ``runtime_config_update`` (Bridge's own, which ends in ``validate()``) passes;
* the TransformerConfig Bridge finalizes (the model provider) equals, field by field, the
  one Megatron's own ``core_transformer_config_from_args`` builds from the same launch;
* the optimizer and DDP configs equal Megatron's own (``training.py``:
  ``get_megatron_optimizer_config``, ``get_megatron_ddp_config``);
* and no given flag is left out without a reason.

The figure: the cases passing all of these, out of those 0.19.2 accepts and whose
container Megatron's classes build here (``test_mlm_config.py`` counts those refused).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import tempfile
import warnings
from typing import Any

import pytest

import reference
from bridge_loader import load_megatron_bridge
from mlm_reference import launch_of, tally

CASES = [path for kind in ("cases", "mutations") for path in reference.case_files(kind)]
VOCABULARY = ["--tokenizer-type", "NullTokenizer", "--vocab-size", "32000"]
BRIDGE_VERSION = "0.6.2"
FIGURE = "bridge export: no unexplained flag, STRICT-loaded, validated, identical"
#: Bridge's refusal of a position table longer than the training sequence, which
#: Megatron-LM takes (--max-position-embeddings above --seq-length): a miss, with its cause.
SEQUENCE_LENGTHS = "Please ensure sequence length configuration in model config and dataset"
#: Differences Bridge's own finalization makes, each (Bridge's value, Megatron's) and why.
FINALIZED = {
    ("model", "use_cpu_initialization"): ((False, None), "Bridge's provider finalizes "
                                          "Megatron's unset None to False: both initialize "
                                          "on the device"),
    ("model", "use_te_rng_tracker"): ((True, False), "Bridge's validate() makes the model's "
                                      "flag follow rng.te_rng_tracker (--te-rng-tracker); "
                                      "Megatron's TransformerConfig leaves it False and its "
                                      "training reads args.te_rng_tracker"),
}


@pytest.fixture(scope="module")
def bridge() -> Any:
    return load_megatron_bridge()


def _case_id(path: Any) -> str:
    return f"{path.parent.name}/{path.stem}"


def _case(path: Any) -> dict[str, Any]:
    case = reference.load_case(path)
    if case["expect"] != "ok":
        pytest.skip("Megatron refuses this launch")
    return {**case, "argv": [*case["argv"], *VOCABULARY]}


def _export(case: dict[str, Any]) -> Any:
    from megaplug_bridge.bridge import export

    quiet = io.StringIO()
    with reference.targeting(case), contextlib.redirect_stdout(quiet), \
            contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(launch_of(case, packages={"megatron_bridge": BRIDGE_VERSION}), "yaml")


def _megatrons(case: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Megatron's own TransformerConfig, optimizer and DDP configs for the launch."""
    from megatron.training.argument_utils import core_transformer_config_from_args
    from megatron.training.training import get_megatron_ddp_config, get_megatron_optimizer_config

    args = reference.megatron_args(case)
    with reference.targeting(case), contextlib.redirect_stdout(io.StringIO()), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return (core_transformer_config_from_args(args), get_megatron_optimizer_config(args)[0],
                get_megatron_ddp_config(args))


def _comparable(value: Any) -> Any:
    import enum
    import functools

    if isinstance(value, functools.partial):
        return (_comparable(value.func), value.args, sorted(value.keywords.items()))
    if isinstance(value, enum.Enum):
        return (type(value).__name__, value.name)
    if isinstance(value, (list, tuple)):
        return tuple(_comparable(item) for item in value)
    return getattr(value, "__qualname__", value) if callable(value) else value


def _differing(built: Any, expected: Any) -> dict[str, tuple[Any, Any]]:
    """The fields of ``expected``'s class (Megatron's) on which ``built`` differs."""
    return {field.name: (getattr(built, field.name, "<absent>"), getattr(expected, field.name))
            for field in dataclasses.fields(expected)
            if _comparable(getattr(built, field.name, "<absent>"))
            != _comparable(getattr(expected, field.name))}


def _load(bridge: Any, text: str, case: dict[str, Any]) -> Any:
    from megatron.training.config.instantiate_utils import InstantiationMode

    with tempfile.TemporaryDirectory() as directory:
        written = os.path.join(directory, "bridge.yaml")
        with open(written, "w", encoding="utf-8") as handle:
            handle.write(text)
        with reference.targeting(case), contextlib.redirect_stdout(io.StringIO()), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = bridge.ConfigContainer.from_yaml(written, mode=InstantiationMode.STRICT)
            bridge.runtime_config_update(config)
    return config


@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_export_is_bridges_own(path: Any, bridge: Any) -> None:
    case = _case(path)
    try:
        expected = _megatrons(case)
    except SystemExit:
        pytest.skip("megatron-core 0.19's own parser refuses this command line")
    except (AssertionError, ValueError):
        pytest.skip("Megatron's config classes refuse this launch here (test_mlm_config.py)")
    try:
        exported = _export(case)
    except ValueError as exc:
        if "raised by Megatron's config classes" not in str(exc):
            raise
        pytest.skip("Megatron's own container classes refuse this launch on this machine "
                    "(test_mlm_config.py counts those refused alike)")
    unexplained = [row for row in exported.not_exported if not row.get("reason")]
    try:
        config = _load(bridge, exported.text, case)
    except AssertionError as exc:
        if SEQUENCE_LENGTHS not in str(exc):
            raise
        tally(FIGURE, False)  # a miss, counted: no container Bridge accepts holds it
        pytest.xfail("Bridge's validate() needs model.seq_length (Megatron's "
                     "--max-position-embeddings) == dataset.seq_length (--seq-length)")
    differing = {section: _differing(built, wanted) for section, built, wanted in
                 zip(("model", "optimizer", "ddp"),
                     (config.model, config.optimizer, config.ddp), expected)}
    for (section, name), (values, _why) in FINALIZED.items():
        if differing[section].get(name) == values:
            del differing[section][name]
    passed = not unexplained and not any(differing.values())
    tally(FIGURE, passed)
    assert unexplained == []
    assert {section: {name: [repr(value) for value in values] for name, values in fields.items()}
            for section, fields in differing.items()} == {"model": {}, "optimizer": {},
                                                          "ddp": {}}


@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_flags_export_import_export_is_the_same_yaml(path: Any) -> None:
    """flags -> export -> ``import bridge`` -> export: the same container (the flags with
    no home, a layer spec, given again as a user resuming from the file would)."""
    from megaplug import TargetEnvironment
    from megaplug_bridge.bridge import import_config

    case = _case(path)
    try:
        reference.megatron_args(case)
        exported = _export(case)
    except (SystemExit, AssertionError, ValueError):
        pytest.skip("refused (counted by test_export_is_bridges_own)")
    with tempfile.TemporaryDirectory() as directory:
        written = os.path.join(directory, "bridge.yaml")
        with open(written, "w", encoding="utf-8") as handle:
            handle.write(exported.text)
        imported = import_config(written, [], TargetEnvironment(
            packages={"megatron_core": "0.19.2"}), case.get("env") or {})
    from megaplug_bridge._container import LEFT_OUT_BY_YAML

    homeless = {row.get("dest") for row in exported.not_exported} & set(LEFT_OUT_BY_YAML)
    again = _export({**case, "argv": [*imported.argv, *_given_again(case["argv"], homeless)]})
    tally("bridge: flags -> export -> import -> export: the same YAML",
          again.text == exported.text)
    assert again.text == exported.text


def _given_again(argv: list[str], dests: set[Any]) -> list[str]:
    """The tokens of ``argv``'s flags that set one of ``dests``."""
    import megaplug

    kernel, _ = megaplug.load()
    kept: list[str] = []
    index = 0
    while index < len(argv):
        token = argv[index]
        spec = kernel.table.lookup(token.split("=", 1)[0]) if token.startswith("--") else None
        width = 1
        while index + width < len(argv) and not argv[index + width].startswith("--"):
            width += 1
        if spec is not None and spec.dest in dests:
            kept += argv[index:index + width]
        index += width
    return kept
