"""``export --to mlm-config`` against Megatron's own ``pretrain_cfg_container_from_args`` +
``to_yaml``, on every shared parity configuration megatron-core 0.19 accepts; the export
loaded by ``PretrainConfigContainer.from_yaml`` in STRICT mode; and the way back
(``import mlm-config``) reproducing the launch."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

import reference
from mlm_reference import megaplug_export, megatron_yaml, tally

CASES = [path for kind in ("cases", "mutations") for path in reference.case_files(kind)]


#: The tokenizer files of the cases are not on this machine, and the model section needs
#: the vocabulary Megatron learns from the tokenizer: each case runs as given (no model
#: section, on both sides) and with Megatron's NullTokenizer of a stated size (all of it).
VOCABULARY = ["--tokenizer-type", "NullTokenizer", "--vocab-size", "32000"]


def _accepted(path: Any, vocabulary: bool) -> dict[str, Any]:
    case = reference.load_case(path)
    if case["expect"] != "ok":
        pytest.skip("Megatron refuses this launch (its container is never built)")
    if vocabulary:
        case = {**case, "argv": [*case["argv"], *VOCABULARY]}
    return case


def _case_id(path: Any) -> str:
    return f"{path.parent.name}/{path.stem}"


@pytest.mark.parametrize("vocabulary", [False, True], ids=["as-given", "null-tokenizer"])
@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_export_is_megatrons_own_yaml(path: Any, vocabulary: bool) -> None:
    case = _accepted(path, vocabulary)
    try:
        expected = megatron_yaml(case)
    except SystemExit:  # a flag of a later revision (the cases were made on one)
        pytest.skip("megatron-core 0.19's own parser refuses this command line")
    except (AssertionError, ValueError) as exc:  # refused here, as Megatron's classes do
        with pytest.raises(ValueError) as refused:
            megaplug_export(case)
        tally(f"refused alike (Megatron's config classes, no Transformer Engine here), "
              f"{'null tokenizer' if vocabulary else 'as given'}",
              str(exc).splitlines()[0] in str(refused.value))
        assert str(exc).splitlines()[0] in str(refused.value)
        return
    exported = megaplug_export(case)
    tally(f"exported YAML identical to Megatron's own, "
          f"{'null tokenizer (model section too)' if vocabulary else 'as given'}",
          exported.text == expected)
    assert exported.text == expected
    unexplained = [row for row in exported.not_exported if not row.get("reason")]
    assert unexplained == []


@pytest.mark.parametrize("path", CASES, ids=_case_id)
def test_export_loads_as_megatrons_own_and_imports_back(path: Any) -> None:
    omegaconf = pytest.importorskip("omegaconf", reason="from_yaml needs omegaconf "
                                    "(scripts/megatron-env.sh installs it beside the env)")
    del omegaconf
    case = _accepted(path, vocabulary=True)
    try:
        megatron_yaml(case)
    except SystemExit:
        pytest.skip("megatron-core 0.19's own parser refuses this command line")
    except (AssertionError, ValueError):
        pytest.skip("Megatron's config classes refuse this launch here")
    try:
        exported = megaplug_export(case)
    except ValueError:
        pytest.skip("Megatron's config classes refuse this launch here")
    from megatron.training.config.container import PretrainConfigContainer
    from megatron.training.config.instantiate_utils import InstantiationMode

    from megaplug import TargetEnvironment
    from megaplug_bridge.mlm_config import import_config

    with tempfile.TemporaryDirectory() as directory:
        written = os.path.join(directory, "config.yaml")
        with open(written, "w", encoding="utf-8") as handle:
            handle.write(exported.text)
        _loads_as_megatrons_own(written, PretrainConfigContainer, InstantiationMode, case)
        version = TargetEnvironment(packages={"megatron_core": "0.19.2"})
        imported = import_config(written, [], version, case.get("env") or {})
    again = megaplug_export(case, argv=_with_kept(case, imported.argv))
    tally("flags -> export -> import -> export: the same YAML", again.text == exported.text)
    assert again.text == exported.text


def _loads_as_megatrons_own(written: str, container: Any, mode: Any,
                            case: dict[str, Any]) -> None:
    """STRICT loading takes the file as it takes Megatron's own: 0.19.2's ``to_yaml`` writes
    the model section's ``_builder_``, which its STRICT ``from_yaml`` then refuses, so a
    file with a model section loads only LENIENT (which drops that key) -- Megatron's own
    file and megaplug's alike."""
    from megatron.training.config.instantiate_utils import InstantiationException

    try:
        loaded = container.from_yaml(written, mode=mode.STRICT)
        strict = "loaded"
    except InstantiationException as exc:
        strict = "refused: " + str(exc).splitlines()[0]
        loaded = container.from_yaml(written, mode=mode.LENIENT)
    assert strict == "loaded" or "'_builder_'" in strict
    tally(f"STRICT from_yaml: {strict}", True)
    assert loaded.train.micro_batch_size == _value(case, "micro_batch_size")


def _value(case: dict[str, Any], dest: str) -> Any:
    return case["namespace"][dest]


def _with_kept(case: dict[str, Any], argv: list[str]) -> list[str]:
    """The imported flags, with the launch's dataset flags (which the container has no
    section for) and those Megatron's YAML leaves out (a layer spec) given again, as a user
    resuming from the YAML would."""
    from megaplug_bridge._container import LEFT_OUT_BY_YAML

    exported = megaplug_export(case)
    homeless = {row["dest"] for row in exported.not_exported
                if row.get("plugin") == "data" or row.get("dest") in LEFT_OUT_BY_YAML}
    kept: list[str] = []
    import megaplug

    kernel, _ = megaplug.load()
    tokens = list(case["argv"])
    index = 0
    while index < len(tokens):
        token = tokens[index]
        spec = kernel.table.lookup(token.split("=", 1)[0]) if token.startswith("--") else None
        width = 1
        while index + width < len(tokens) and not tokens[index + width].startswith("--"):
            width += 1
        if spec is not None and spec.dest in homeless:
            kept += tokens[index:index + width]
        index += width
    return [*argv, *kept]
