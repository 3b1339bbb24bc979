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
