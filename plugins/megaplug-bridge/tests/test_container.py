"""Reading Megatron's config container back as settings, torch-free: fields, renamings,
the values Megatron's YAML representers write, Hydra-style overrides, and the commands."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from megaplug_bridge._container import (FILLED_FROM_NONE, ONE_WAY_SETTINGS, apply_overrides,
                                        fields, is_container, plain, read_settings)

CONTAINER = "megatron.training.config.container.PretrainConfigContainer"

#: A cut-down container as Megatron 0.19.2's to_yaml writes one (the same keys and value
#: forms; most fields left out).
SMALL = textwrap.dedent(f"""\
    _target_: {CONTAINER}
    checkpoint:
      _target_: megatron.training.config.training_config.CheckpointConfig
      save_optim: false
      load: /ckpt
    ddp:
      _target_: megatron.core.distributed.DistributedDataParallelConfig
      grad_reduce_in_fp32: true
    model:
      _builder_: megatron.training.models.gpt.GPTModelBuilder
      _target_: megatron.training.models.gpt.GPTModelConfig
      seq_length: 128
      share_embeddings_and_output_weights: false
      should_pad_vocab: true
      vocab_size: 1000
      transformer:
        _target_: megatron.core.transformer.transformer_config.TransformerConfig
        attention_backend:
          _args_: [5]
          _call_: true
          _name_: auto
          _target_: megatron.core.transformer.enums.AttnBackend
        params_dtype:
          _call_: false
          _target_: torch.bfloat16
        bf16: true
        hidden_size: 64
        num_attention_heads: 4
        num_query_groups: 4
        num_layers: 2
        gated_linear_unit: true
        bias_activation_fusion: false
    train:
      _target_: megatron.training.config.training_config.TrainingConfig
      micro_batch_size: 1
      train_iters: 10
    """)

SETTABLE = {"load", "bf16", "hidden_size", "num_attention_heads", "num_layers",
            "micro_batch_size", "train_iters", "attention_backend", "num_query_groups"}


def _parsed(text: str = SMALL) -> dict:
    from megaplug.sources._files import parse_yaml

    return parse_yaml(text, "test")


def test_a_container_is_known_by_its_target() -> None:
    assert is_container(_parsed())
    assert not is_container({"num_layers": 2})
    assert not is_container({"_target_": "something.Else"})


def test_fields_walk_nested_configs_but_not_values() -> None:
    walked = dict(fields(_parsed()))
    assert walked["model.transformer.num_layers"] == 2
    assert walked["model.transformer.params_dtype"] == {"_call_": False,
                                                        "_target_": "torch.bfloat16"}
    assert "model._builder_" not in walked


def test_plain_turns_representer_forms_into_flag_values() -> None:
    assert plain({"_call_": False, "_target_": "torch.float32"}) == "fp32"
    assert plain({"_args_": [5], "_call_": True, "_name_": "auto", "_target_": "x.AttnBackend"}) \
        == "auto"
    assert plain([{"_call_": False, "_target_": "torch.bfloat16"}, 3]) == ["bf16", 3]


def test_settings_follow_megatrons_renamings_and_switches() -> None:
    settings = read_settings(_parsed(), SETTABLE.__contains__)
    values = settings.values
    assert values["no_save_optim"] is True            # checkpoint.save_optim: false
    assert values["accumulate_allreduce_grads_in_fp32"] is True
    assert values["max_position_embeddings"] == 128   # model.seq_length
    assert values["untie_embeddings_and_output_weights"] is True
    assert values["vocab_size"] == 1000               # padded by the container
    assert values["attention_backend"] == "auto"
    assert values["swiglu"] is True and values["bias_swiglu_fusion"] is False
    assert "num_query_groups" not in values           # the head count: no GQA
    assert "group_query_attention" not in values
    assert settings.one_way["model.transformer.params_dtype"].startswith("no flag")
    assert settings.problems == []


def test_grouped_query_attention_is_read_from_the_group_count() -> None:
    data = _parsed()
    data["model"]["transformer"]["num_query_groups"] = 2
    values = read_settings(data, SETTABLE.__contains__).values
    assert values["group_query_attention"] is True and values["num_query_groups"] == 2


def test_a_value_the_config_class_fills_from_no_flag_is_left_to_the_release() -> None:
    data = _parsed()
    transformer = data["model"]["transformer"]
    transformer.update(init_method_std=0.02, embedding_init_method_std=0.02,
                       pipeline_model_parallel_size=2, microbatch_group_size_per_vp_stage=2,
                       recompute_modules=["core_attn"])
    settings = read_settings(data, lambda dest: True)
    for path in FILLED_FROM_NONE:
        assert path.rpartition(".")[2] not in settings.values
        assert settings.one_way[path].startswith("the config class fills it")
    transformer.update(embedding_init_method_std=0.01, recompute_modules=["mlp"])
    values = read_settings(data, lambda dest: True).values
    assert values["embedding_init_method_std"] == 0.01 and values["recompute_modules"] == ["mlp"]


def test_the_one_way_fields_are_the_ones_docs_interop_lists() -> None:
    """docs/interop.md's one-way list names each field and flag of the plugin's constants
    (the Megatron tier's round-trip test leaves exactly ONE_WAY_SETTINGS out)."""
    page = (Path(__file__).resolve().parents[3] / "docs" / "interop.md").read_text()
    section = page.split("## What the container has no home for")[1].split("\n## ")[0]
    for path in FILLED_FROM_NONE:
        assert f"`{path.rpartition('.')[2]}`" in section
    for given, changed in ONE_WAY_SETTINGS.items():
        assert f"`--{given.replace('_', '-')}`" in section
        for dest in changed:
            assert dest in section or f"--{dest.replace('_', '-')}" in section


def test_two_fields_of_one_setting_must_agree() -> None:
    data = _parsed()
    data["rerun_state_machine"] = {"_target_": "x.RerunStateMachineConfig",
                                   "check_for_nan_in_loss": True}
    data["ddp"]["check_for_nan_in_grad"] = False
    problems = read_settings(data, SETTABLE.__contains__).problems
    assert len(problems) == 1 and "check_for_nan_in_loss_and_grad" in problems[0]


def test_overrides_set_add_and_remove() -> None:
    data = _parsed()
    assert apply_overrides(data, ["train.train_iters=20", "+train.exit_interval=5",
                                  "~checkpoint.load"]) == []
    assert data["train"]["train_iters"] == 20 and data["train"]["exit_interval"] == 5
    assert "load" not in data["checkpoint"]


def test_override_mistakes_are_named_each() -> None:
    data = _parsed()
    mistakes = apply_overrides(data, ["train.train_itres=3", "nosection.x=1", "plain"])
    assert len(mistakes) == 3
    assert "did you mean train_iters" in mistakes[0]
    assert "no section nosection" in mistakes[1]
    assert "key=value" in mistakes[2]
    assert data["train"]["train_iters"] == 10


def _megaplug(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "megaplug", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_import_prints_the_flags_of_a_container(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(SMALL)
    done = _megaplug("import", "mlm-config", "run.yaml", "train.train_iters=20",
                     "--to", "0.19.2", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    argv = json.loads(done.stdout)["argv"]
    joined = " ".join(argv)
    for expected in ("--num-layers 2", "--hidden-size 64", "--train-iters 20", "--bf16",
                     "--load /ckpt", "--no-save-optim", "--swiglu",
                     "--untie-embeddings-and-output-weights"):
        assert expected in joined


def test_import_refuses_what_is_no_container(tmp_path: Path) -> None:
    (tmp_path / "plain.yaml").write_text("num_layers: 2\n")
    done = _megaplug("import", "mlm-config", "plain.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "no Megatron-LM config container" in done.stderr


def test_a_container_is_a_config_file_for_resolve(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(SMALL)
    done = _megaplug("explain", "num_layers", "--config", "run.yaml", "--",
                     "--seq-length", "128", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "value:     2" in done.stdout
    assert "config file run.yaml" in done.stdout


def test_export_without_megatron_says_what_it_needs(tmp_path: Path) -> None:
    pytest.importorskip("megaplug")
    try:
        import megatron.training.argument_utils  # noqa: F401
        pytest.skip("megatron-core is installed here (the Megatron tier tests export)")
    except ImportError:
        pass
    done = _megaplug("export", "--to", "mlm-config", "--", "--num-layers", "2", cwd=tmp_path)
    assert done.returncode == 2
    assert "megatron-core 0.18 or later" in done.stderr


def test_an_unknown_format_is_named_with_the_installed_ones(tmp_path: Path) -> None:
    done = _megaplug("export", "--to", "mlm-confg", "--", "--num-layers", "2", cwd=tmp_path)
    assert done.returncode == 2
    assert "did you mean mlm-config?" in done.stderr


def test_overrides_that_do_not_apply_fail_the_import(tmp_path: Path) -> None:
    (tmp_path / "run.yaml").write_text(SMALL)
    done = _megaplug("import", "mlm-config", "run.yaml", "train.nope=1", cwd=tmp_path)
    assert done.returncode == 2 and "train.nope is no key" in done.stderr

