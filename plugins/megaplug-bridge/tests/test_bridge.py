"""A Megatron-Bridge ``ConfigContainer`` read back as Megatron-LM flags, torch-free:
``megaplug import bridge``, its Hydra-style overrides, and the container as a config
file of every command (``--config``, a SOURCE). The export and the judging by Bridge's
own code are the Megatron tier's (``tests/megatron/test_bridge_export.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megaplug_bridge.bridge import as_megatron_container, bridge_sections, is_bridge_container

#: A cut-down container as ``megaplug export --to bridge`` writes one (Bridge 0.6.2's
#: classes and value forms; most fields left out).
SMALL = textwrap.dedent("""\
    _target_: megatron.bridge.training.config.ConfigContainer
    checkpoint:
      _target_: megatron.bridge.training.config.CheckpointConfig
      load: /ckpt
      save_optim: false
    dataset:
      _target_: megatron.bridge.training.config.GPTDatasetConfig
      random_seed: 1234
      seq_length: 128
      sequence_length: 128
    model:
      _target_: megatron.bridge.models.gpt_provider.GPTModelProvider
      bf16: true
      hidden_size: 64
      num_attention_heads: 4
      num_layers: 2
      params_dtype:
        _call_: false
        _target_: torch.bfloat16
      seq_length: 256
      share_embeddings_and_output_weights: false
      should_pad_vocab: true
      vocab_size: 1000
    tokenizer:
      _target_: megatron.bridge.training.tokenizers.config.TokenizerConfig
      tokenizer_type: NullTokenizer
      vocab_size: 1000
    train:
      _target_: megatron.bridge.training.config.TrainingConfig
      eval_iters: null
      micro_batch_size: 1
      train_iters: 10
    validation:
      _target_: megatron.training.config.training_config.ValidationConfig
      eval_iters: 5
    mixed_precision: null
    """)


def _megaplug(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "megaplug", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "bridge.yaml"
    path.write_text(SMALL)
    return path


def test_the_flat_provider_splits_as_megatrons_model_and_transformer() -> None:
    import yaml

    shaped = as_megatron_container(yaml.safe_load(SMALL))
    assert shaped["_target_"] == "megatron.training.config.container.PretrainConfigContainer"
    assert shaped["model"]["seq_length"] == 256  # Megatron's model.seq_length
    assert "seq_length" not in shaped["model"]["transformer"]
    assert shaped["model"]["transformer"]["num_layers"] == 2
    assert shaped["model"]["transformer"]["_target_"].endswith(".TransformerConfig")
    # Bridge's deprecated alias, unset, gives way to validation's value
    assert "eval_iters" not in shaped["train"]


def test_mla_provider_reads_as_multi_latent_attention() -> None:
    data = {"_target_": "megatron.bridge.training.config.ConfigContainer",
            "model": {"_target_": "megatron.bridge.models.mla_provider.MLAModelProvider",
                      "kv_lora_rank": 512}}
    shaped = as_megatron_container(data)
    assert shaped["model"]["transformer"]["_target_"].endswith(".MLATransformerConfig")
    assert is_bridge_container(data) and not is_bridge_container(shaped)


def test_import_bridge_prints_the_flags(small: Path, tmp_path: Path) -> None:
    result = _megaplug("import", "bridge", str(small), "--to", "0.19.2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    flags = result.stdout.split()
    pairs = dict(zip(flags, flags[1:]))
    assert pairs["--max-position-embeddings"] == "256"  # model.seq_length
    assert pairs["--seq-length"] == "128"  # dataset.seq_length
    assert pairs["--num-layers"] == "2" and pairs["--vocab-size"] == "1000"
    assert pairs["--load"] == "/ckpt" and pairs["--eval-iters"] == "5"
    assert {"--bf16", "--no-save-optim", "--untie-embeddings-and-output-weights"} <= set(flags)


def test_the_model_fields_keep_the_files_order() -> None:
    """Not a set's order, which changes with the process's hash seed (the command line
    ``import bridge`` writes followed it)."""
    shaped = as_megatron_container(
        {"_target_": "megatron.bridge.training.config.ConfigContainer",
         "model": {"_target_": "megatron.bridge.models.gpt_provider.GPTModelProvider",
                   "vocab_size": 1000, "num_layers": 2, "seq_length": 128}})
    assert [name for name in shaped["model"] if name != "transformer"] == [
        "_target_", "vocab_size", "seq_length"]


def test_import_bridge_is_the_same_under_every_hash_seed(small: Path, tmp_path: Path) -> None:
    import os

    printed = set()
    for seed in ("0", "1", "2", "3", "4", "5"):
        result = subprocess.run([sys.executable, "-m", "megaplug", "import", "bridge", str(small),
                                 "--to", "0.19.2"], cwd=tmp_path, capture_output=True, text=True,
                                env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120)
        assert result.returncode == 0, result.stderr
        printed.add(result.stdout)
    assert len(printed) == 1


def test_overrides_apply_to_bridges_keys(small: Path, tmp_path: Path) -> None:
    result = _megaplug("import", "bridge", str(small), "train.train_iters=20",
                       "~checkpoint.load", "+train.exit_interval=5", "--format", "json",
                       cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    argv = json.loads(result.stdout)["argv"]
    assert argv[argv.index("--train-iters") + 1] == "20"
    assert argv[argv.index("--exit-interval") + 1] == "5"
    assert "--load" not in argv


def test_a_wrong_override_and_a_foreign_file_are_named(small: Path, tmp_path: Path) -> None:
    result = _megaplug("import", "bridge", str(small), "train.train_iter=20", cwd=tmp_path)
    assert result.returncode == 2
    assert "train.train_iter is no key of the container" in result.stderr
    assert "train_iters" in result.stderr
    other = tmp_path / "other.yaml"
    other.write_text("_target_: something.Else\n")
    result = _megaplug("import", "bridge", str(other), cwd=tmp_path)
    assert result.returncode == 2
    assert "is no Megatron-Bridge ConfigContainer" in result.stderr


def test_a_bridge_container_is_a_config_file(small: Path, tmp_path: Path) -> None:
    result = _megaplug("explain", "train_iters", "--config", str(small), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "10" in result.stdout and f"config file {small}" in result.stdout


def test_export_needs_a_measured_bridge_version() -> None:
    from megaplug import TargetEnvironment

    version, sections = bridge_sections(TargetEnvironment(
        packages={"megatron_bridge": "0.6.2"}))
    assert version == "0.6.2"
    assert sections["model"]["_target_"] == \
        "megatron.bridge.models.gpt_provider.GPTModelProvider"
    assert sections["model"]["fields"]["share_embeddings_and_output_weights"] == \
        {"default": True}
    with pytest.raises(ValueError, match="--assume megatron_bridge=VERSION .measured: 0.6.2.; "
                                         "0.1.0 is not measured"):
        bridge_sections(TargetEnvironment(packages={"megatron_bridge": "0.1.0"}))
