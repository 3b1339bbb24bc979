"""megaplug schema (checked with jsonschema) and megaplug diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_support import VALID, run

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def validator(capsys, clean_env):
    code, out, _ = run(capsys, "schema")
    assert code == 0
    schema = json.loads(out)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator, document) -> list[str]:
    return sorted(error.message for error in validator.iter_errors(document))


def test_schema_describes_every_settable_setting(validator):
    from megaplug import load

    schema = validator.schema
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    kernel, _ = load([], environ={})
    settable = {d for d, specs in kernel.table.by_dest.items() if specs[0].kind != "computed"}
    assert set(schema["properties"]) == settable
    layers = schema["properties"]["num_layers"]
    assert layers["type"] == ["integer", "null"] and layers["default"] is None
    assert layers["description"].startswith("Number of transformer layers")
    assert "[plugin model; --num-layers]" in layers["description"]
    assert schema["properties"]["swiglu"]["type"] == ["boolean"]
    assert "flash" in schema["properties"]["attention_backend"]["enum"]


def test_every_shipped_example_config_is_valid(validator):
    configs = sorted((ROOT / "examples" / "configs").glob("*.yaml"))
    assert configs
    for config in configs:
        assert _errors(validator, yaml.safe_load(config.read_text())) == [], config


def test_a_given_dump_is_valid(validator, capsys, clean_env):
    code, out, _ = run(capsys, "resolve", "--given", "--format", "yaml", "--", *VALID,
                       "--attention-backend", "flash", "--swiglu", "--lr", "1e-4",
                       "--rampup-batch-size", "4", "4", "100", "--data-path", "a", "b")
    dump = yaml.safe_load(out)
    assert code == 0 and dump["attention_backend"] == "AttnBackend.flash"
    assert _errors(validator, dump) == []


def test_every_parity_case_given_dump_is_valid(validator):
    """The settings of every valid Megatron case, as `resolve --given` dumps them."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "parity"))
    import megaplug
    from megaplug.values._encoding import encode
    from parity import case_files, target_for, third_party_blocks

    checked = 0
    for path in case_files():
        case = json.loads(path.read_text())
        if case.get("expect") != "ok":
            continue
        try:
            resolved = megaplug.resolve([*third_party_blocks(), *case["argv"]],
                                        environ=dict(case.get("env") or {}),
                                        defaults=case.get("args_defaults") or {},
                                        target=target_for(case))
        except megaplug.ConfigError:
            continue  # the facade's checkpoint reading, not needed here
        given = {k: encode(v) for k, v in resolved.given_values().items()
                 if k not in ("rank", "world_size") and not k.startswith("_")}
        assert _errors(validator, given) == [], path.name
        checked += 1
    if not case_files():
        pytest.skip("the shared parity cases are not here")
    assert checked > 50


def test_a_wrong_type_and_an_unknown_key_fail(validator):
    assert _errors(validator, {"num_layers": "two", "hidden_sise": 64, "swiglu": 1}) == [
        "'two' is not of type 'integer', 'null'",
        "1 is not of type 'boolean'",
        "Additional properties are not allowed ('hidden_sise' was unexpected)"]
    assert _errors(validator, {"attention_backend": "flashy"}) != []
    assert _errors(validator, {"lr": 1, "data_path": "single"}) == []


def test_what_the_schema_refuses_megaplug_refuses_too(validator, tmp_path):
    import megaplug

    for document in ({"num_layers": "two"}, {"attention_backend": "flashy"}, {"hidden_sise": 3}):
        config = tmp_path / "c.json"
        config.write_text(json.dumps(document))
        assert _errors(validator, document)
        with pytest.raises(megaplug.ConfigError):
            megaplug.resolve(VALID, config_files=[str(config)], environ={})


def test_schema_of_one_plugin_and_of_an_unknown_one(capsys, clean_env):
    code, out, _ = run(capsys, "schema", "--plugin", "moe")
    schema = json.loads(out)
    assert code == 0 and "num_experts" in schema["properties"]
    assert "num_layers" not in schema["properties"]
    code, _, err = run(capsys, "schema", "--plugin", "mooe")
    assert code == 2 and "did you mean moe?" in err


# -- diff ------------------------------------------------------------------------------

def _config(tmp_path, name: str, **values) -> str:
    base = yaml.safe_load((ROOT / "examples" / "configs" / "tiny-gpt.yaml").read_text())
    base.update(values)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(base))
    return str(path)


def test_diff_two_config_files_by_plugin_with_provenance(capsys, clean_env, tmp_path):
    a = _config(tmp_path, "a.yaml")
    b = _config(tmp_path, "b.yaml", hidden_size=128, lr=0.001)
    code, out, err = run(capsys, "diff", a, b)
    assert code == 0 and "problem" not in err  # warnings only
    assert out.splitlines() == [
        f"A: config file {a}", f"B: config file {b}",
        "[model]",
        "  ffn_hidden_size: 128 -> 320",
        "      A: derived by model from hidden_size, swiglu (2/3 of 4 x hidden size, a multiple "
        "of 64, for SwiGLU)",
        "      B: derived by model from hidden_size, swiglu (2/3 of 4 x hidden size, a multiple "
        "of 64, for SwiGLU)",
        "  hidden_size: 64 -> 128", f"      A: config file {a}", f"      B: config file {b}",
        "  kv_channels: 16 -> 32",
        "      A: derived by model from hidden_size, num_attention_heads (hidden size / "
        "attention heads)",
        "      B: derived by model from hidden_size, num_attention_heads (hidden size / "
        "attention heads)",
        "[training]",
        "  lr: 0.003 -> 0.001", f"      A: config file {a}", f"      B: config file {b}",
        out.splitlines()[-1]]
    assert out.splitlines()[-1].startswith("4 settings differ (")


def test_diff_json_and_exit_code_and_args_on_top(capsys, clean_env, tmp_path):
    a = _config(tmp_path, "a.yaml")
    b = _config(tmp_path, "b.yaml", lr=0.001)
    assert run(capsys, "diff", a, b, "--exit-code")[0] == 1
    code, out, _ = run(capsys, "diff", a, b, "--json", "--", "--lr", "0.5")
    document = json.loads(out)
    assert code == 0 and document["differences"] == []
    assert document["a"] == {"label": f"config file {a}", "kind": "config-file", "problems": []}
    assert run(capsys, "diff", a, a, "--exit-code")[0] == 0


def test_diff_against_a_saved_resolve_output(capsys, clean_env, tmp_path):
    a = _config(tmp_path, "a.yaml")
    code, out, _ = run(capsys, "resolve", "--config", a)
    saved = tmp_path / "resolved.json"
    saved.write_text(out)
    code, out, _ = run(capsys, "diff", str(saved), "--json", "--", "--config", a,
                       "--num-layers", "3")
    document = json.loads(out)
    assert code == 0 and document["a"]["kind"] == "resolved"
    assert [(d["setting"], d["a"]["value"], d["b"]["value"], d["b"]["provenance"])
            for d in document["differences"]] == [
        ("encoder_num_layers", 2, 3, "derived by model from num_layers (same as the layer count)"),
        ("num_layers", 2, 3, "command line --num-layers")]


def test_diff_a_checkpoint_against_a_command_line(capsys, clean_env, tmp_path):
    torch = pytest.importorskip("torch")
    from megaplug import resolve
    from megaplug.builtin.model.types import AttnBackend

    saved = resolve([*VALID, "--attention-backend", "flash"], environ={}).to_namespace(
        torch_types=True)
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "iter_0000010" / "mp_rank_00").mkdir(parents=True)
    torch.save({"args": saved, "iteration": 10, "checkpoint_version": 3.0},
               checkpoint / "iter_0000010" / "mp_rank_00" / "model_optim_rng.pt")
    (checkpoint / "latest_checkpointed_iteration.txt").write_text("10")
    assert saved.attention_backend is AttnBackend.flash
    code, out, err = run(capsys, "diff", str(checkpoint), "--", *VALID,
                         "--attention-backend", "flash", "--hidden-size", "128")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[:2] == [f"A: checkpoint {checkpoint} (iteration 10)", "B: command line"]
    assert "  hidden_size: 64 -> 128" in lines
    assert f"      A: checkpoint {checkpoint}" in lines
    assert "  attention_backend" not in out  # enums and dtypes compare equal across the two
    assert "params_dtype" not in out


def test_diff_usage_errors(capsys, clean_env, tmp_path):
    a = _config(tmp_path, "a.yaml")
    code, _, err = run(capsys, "diff", a)
    assert code == 2 and "compare A with what?" in err
    code, _, err = run(capsys, "diff", a, a, a)
    assert code == 2 and "compares two things" in err
    code, _, err = run(capsys, "diff", str(tmp_path / "none.yaml"), a)
    assert code == 2 and "cannot read config file" in err
    code, _, err = run(capsys, "diff", str(tmp_path), "--", "--num-layers", "2")
    assert code == 2 and "no checkpoint found" in err


def test_diff_with_an_invalid_side_shows_it_and_exits_2(capsys, clean_env, tmp_path):
    a = _config(tmp_path, "a.yaml")
    code, out, err = run(capsys, "diff", a, "--", *VALID, "--num-attention-heads", "7")
    assert code == 2 and "num_attention_heads: 4 -> 7" in out
    assert "B (command line) is not a valid configuration" in err
    assert "--num-attention-heads 7" in err
