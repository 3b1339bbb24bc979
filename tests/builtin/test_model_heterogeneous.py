"""The model plugin's heterogeneous layer configs (HuggingFace Llama-Nemotron style)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_ckpt_support import messages, problems, resolve  # noqa: E402

HF_CONFIG: dict[str, Any] = {
    "hidden_act": "silu",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 8,
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0},
    "block_configs": [
        {"attention": {"n_heads_in_group": 4, "no_op": False}, "ffn": {"ffn_mult": 2.625}},
        {"attention": {"n_heads_in_group": None, "no_op": True}, "ffn": {"ffn_mult": 2.625}},
    ],
}

#: The flags a matching command line gives.
MATCHING = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "8",
            "--max-position-embeddings", "128", "--swiglu", "--normalization", "RMSNorm",
            "--group-query-attention", "--num-query-groups", "2",
            "--position-embedding-type", "rope", "--use-rope-scaling",
            "--use-rotary-position-embeddings", "--untie-embeddings-and-output-weights",
            "--rotary-base", "500000"]


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(HF_CONFIG))
    return path


def test_a_matching_command_line_is_accepted_and_the_file_is_kept_as_encoded_json(config_file):
    resolved = resolve(MATCHING + ["--heterogeneous-layers-config-path", str(config_file)])
    assert json.loads(resolved.heterogeneous_layers_config_encoded_json) == HF_CONFIG
    assert resolved.source("heterogeneous_layers_config_encoded_json").inputs == (
        "heterogeneous_layers_config_path",)


def test_encoded_json_is_used_as_given():
    text = json.dumps(HF_CONFIG)
    resolved = resolve(MATCHING + ["--heterogeneous-layers-config-encoded-json", text])
    assert resolved.heterogeneous_layers_config_encoded_json == text


def test_every_differing_flag_is_named(config_file):
    argv = [a for a in MATCHING if a not in ("--swiglu", "--use-rope-scaling")]
    found = problems(argv + ["--heterogeneous-layers-config-path", str(config_file)])
    assert len(found) == 1
    assert found[0].message == (
        "the heterogeneous layers config disagrees with the command line: --swiglu is False but "
        "the config needs True, --use-rope-scaling is False but the config needs True")
    assert found[0].flags == ("--swiglu", "--use-rope-scaling",
                              "--heterogeneous-layers-config-path")


def test_the_query_group_count_follows_n_heads_in_group(config_file):
    argv = (MATCHING[:MATCHING.index("--num-query-groups")]
            + MATCHING[MATCHING.index("--num-query-groups") + 2:])
    found = messages(argv + ["--heterogeneous-layers-config-path", str(config_file)])
    assert "--num-query-groups is 1 but the config needs 2" in found[0]


def test_hidden_act_must_be_silu(tmp_path):
    path = tmp_path / "gelu.json"
    path.write_text(json.dumps({**HF_CONFIG, "hidden_act": "gelu"}))
    found = messages(MATCHING + ["--heterogeneous-layers-config-path", str(path)])
    assert found == ["--heterogeneous-layers-config-path: hidden_act is 'gelu'; heterogeneous "
                     "models must use 'silu'"]


def test_n_heads_in_group_must_agree_across_layers():
    blocks = [{"attention": {"n_heads_in_group": n}} for n in (4, 2)]
    text = json.dumps({**HF_CONFIG, "block_configs": blocks})
    found = messages(MATCHING + ["--heterogeneous-layers-config-encoded-json", text])
    assert found == ["--heterogeneous-layers-config-encoded-json: n_heads_in_group differs between "
                     "layers ([2, 4]); every attention layer must use the same number"]


def test_a_missing_file_is_reported(tmp_path):
    found = problems(MATCHING + ["--heterogeneous-layers-config-path", str(tmp_path / "none.json")])
    assert found[0].message.startswith("--heterogeneous-layers-config-path ")
    assert "cannot read the file" in found[0].message


def test_invalid_json_and_missing_entries_are_reported():
    assert "not valid JSON" in messages(
        MATCHING + ["--heterogeneous-layers-config-encoded-json", "{oops"])[0]
    incomplete = {k: v for k, v in HF_CONFIG.items() if k != "rope_theta"}
    found = messages(MATCHING + ["--heterogeneous-layers-config-encoded-json",
                                 json.dumps(incomplete)])
    assert "lacks a usable entry (KeyError: 'rope_theta')" in found[0]


def test_no_config_means_no_check():
    assert (resolve(["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "8",
                     "--max-position-embeddings", "128"])
            .heterogeneous_layers_config_encoded_json is None)


ENCODED = "--heterogeneous-layers-config-encoded-json"


@pytest.mark.parametrize("text, expected", [
    (json.dumps({**HF_CONFIG, "hidden_act": "gelu"}),
     (f"{ENCODED}: hidden_act is 'gelu'; heterogeneous models must use 'silu'", (ENCODED,),
      "use a config whose hidden_act is silu")),
    ("[1]", (f"{ENCODED}: not valid JSON (the top level is not an object)", (ENCODED,),
             "give a HuggingFace-style config.json object")),
    (json.dumps({k: v for k, v in HF_CONFIG.items() if k != "rope_theta"}),
     (f"{ENCODED}: the heterogeneous config lacks a usable entry (KeyError: 'rope_theta')",
      (ENCODED,), "the config needs hidden_act, block_configs, num_hidden_layers, hidden_size, "
                  "num_attention_heads, tie_word_embeddings, rope_theta and rope_scaling.factor")),
    (json.dumps({**HF_CONFIG, "block_configs": [{"attention": {"n_heads_in_group": n}}
                                                for n in (4, 2)]}),
     (f"{ENCODED}: n_heads_in_group differs between layers ([2, 4]); every attention layer must "
      "use the same number", (ENCODED,), "use one n_heads_in_group for all attention layers")),
])
def test_each_unusable_config_whole(text, expected):
    assert [(p.message, tuple(p.flags), p.hint)
            for p in problems(MATCHING + [ENCODED, text])] == [expected]


def test_an_unreadable_file_whole(tmp_path):
    path = tmp_path / "none.json"
    assert [(p.message, tuple(p.flags), p.hint)
            for p in problems(MATCHING + ["--heterogeneous-layers-config-path", str(path)])] == [
        (f"--heterogeneous-layers-config-path {path}: cannot read the file (cannot read "
         f"heterogeneous layers config {path}: No such file or directory)",
         ("--heterogeneous-layers-config-path",),
         "give the path of an existing JSON file")]


def test_a_disagreeing_command_line_whole(config_file):
    found = problems(["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "8",
                      "--max-position-embeddings", "128", "--swiglu", "--rotary-base", "500000",
                      "--heterogeneous-layers-config-path", str(config_file)])
    assert [(p.message, tuple(p.flags), p.hint) for p in found] == [
        ("the heterogeneous layers config disagrees with the command line: --normalization is "
         "'LayerNorm' but the config needs 'RMSNorm', --group-query-attention is False but the "
         "config needs True, --position-embedding-type is 'learned_absolute' but the config "
         "needs 'rope', --use-rope-scaling is False but the config needs True, "
         "--use-rotary-position-embeddings is False but the config needs True, "
         "--untie-embeddings-and-output-weights is False but the config needs True, "
         "--num-query-groups is 1 but the config needs 2",
         ("--normalization", "--group-query-attention", "--position-embedding-type",
          "--use-rope-scaling", "--use-rotary-position-embeddings",
          "--untie-embeddings-and-output-weights", "--num-query-groups",
          "--heterogeneous-layers-config-path"),
         "set these flags to the values the heterogeneous config implies")]


def test_a_file_is_kept_as_encoded_json_provenance(config_file):
    resolved = resolve(MATCHING + ["--heterogeneous-layers-config-path", str(config_file)])
    record = resolved.source(ENCODED[2:].replace("-", "_"))
    assert (record.source, record.reason, tuple(record.inputs)) == (
        "normalized", f"read from {config_file}", ("heterogeneous_layers_config_path",))


def test_a_disagreeing_encoded_config_names_itself():
    found = problems(["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "8",
                      "--max-position-embeddings", "128", *MATCHING[8:],
                      "--num-query-groups", "4", ENCODED, json.dumps(HF_CONFIG)])
    assert [tuple(p.flags) for p in found] == [("--num-query-groups", ENCODED)]
