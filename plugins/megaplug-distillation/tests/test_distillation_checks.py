"""The distillation flags and each of their checks, accepted and rejected."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import pytest
from typing_extensions import Annotated

import megaplug
import megaplug_distillation
from megaplug import Flag, PluginInfo, hookimpl

NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}
FLAGS_JSONL = Path(os.environ.get(
    "MEGAPLUG_FLAGS_JSONL",
    Path(__file__).resolve().parents[4] / "shared" / "megatron" / "flags.jsonl"))
ACTIONS = {"store": "_StoreAction", "store_true": "_StoreTrueAction"}


@dataclass
class PeerOptions:
    """The checkpointing and training settings the distillation checks read."""

    async_save: Annotated[bool, Flag()] = False
    freeze_all_layers: Annotated[bool, Flag()] = False
    rampup_batch_size: Annotated[Optional[list[int]], Flag(nargs=3)] = None


class Peers:
    """Stands in for the checkpointing and training plugins."""

    megaplug_plugin = PluginInfo(name="peers", description="Test stand-in.")

    @hookimpl
    def add_args(self, flags: Any) -> None:
        flags.add_options(PeerOptions)


PEERS = Peers()
SAVING = ["--logits-save-dir", "/tmp/logits", "--logits-save-top-k", "64", "--async-save",
          "--freeze-all-layers"]


def kernel() -> Any:
    return megaplug.load(builtins=[PEERS, megaplug_distillation], environ=NO_AUTOLOAD)[0]


def outcome(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(problems, warnings) the distillation plugin reports, as text."""
    try:
        resolved = kernel().resolve(list(argv), environ={})
    except megaplug.ConfigError as error:
        assert all(p.plugin == "distillation" for p in error.problems), error
        return [str(p) for p in error.problems], []
    return [], [str(w) for w in resolved.warnings if w.plugin == "distillation"]


def test_declares_megatrons_flags_plus_the_seed_only_one() -> None:
    specs = [s for s in kernel().table if s.plugin == "distillation"]
    assert len(specs) == 12
    by_dest = {s.dest: s for s in specs}
    hash_flag = by_dest["logits_load_ignore_hash"]
    assert hash_flag.option_strings == ("--logits-load-ignore-hash",)
    assert hash_flag.action == "store_true" and hash_flag.default is False
    if not FLAGS_JSONL.exists():
        pytest.skip(f"{FLAGS_JSONL} not available")
    for line in FLAGS_JSONL.read_text().splitlines():
        fact = json.loads(line)
        if fact["group"] != "Logits Distillation":
            continue
        spec = by_dest.pop(fact["dest"])
        assert list(spec.option_strings) == fact["option_strings"]
        assert ACTIONS[spec.action] == fact["action"]
        assert spec.type_name == fact["type"]
        assert spec.default == fact["default"] and type(spec.default) is type(fact["default"])
        assert (list(spec.choices) if spec.choices else None) == fact["choices"]
    assert list(by_dest) == ["logits_load_ignore_hash"]


def test_defaults_and_values() -> None:
    resolved = kernel().resolve(["--logits-load-dir", "/data/logits", "--logits-load-ignore-hash",
                                 "--logits-load-kd-loss-alpha", "0.5"], environ={})
    assert resolved.logits_load_dir == "/data/logits"
    assert resolved.logits_load_ignore_hash is True
    assert resolved.logits_load_kd_loss_alpha == 0.5
    assert resolved.logits_save_top_k is None
    assert resolved.logits_save_dtype == "fp16"
    assert resolved.logits_load_prefetch_factor == 3


def test_bad_dtype_is_rejected() -> None:
    with pytest.raises(megaplug.ConfigError) as info:
        kernel().resolve(["--logits-save-dtype", "int8"], environ={})
    assert any(p.plugin == "distillation" and "--logits-save-dtype" in p.message
               for p in info.value.problems)


def test_complete_save_configuration_passes_quietly() -> None:
    assert outcome(SAVING) == ([], [])


def test_no_saving_no_checks() -> None:
    assert outcome(["--rampup-batch-size", "16", "16", "1000"]) == ([], [])


def test_saving_needs_top_k() -> None:
    argv = [a for a in SAVING if a not in ("--logits-save-top-k", "64")]
    [problem], _ = outcome(argv)
    assert "[distillation] --logits-save-dir requires --logits-save-top-k" in problem


def test_saving_needs_async_save() -> None:
    [problem], _ = outcome([a for a in SAVING if a != "--async-save"])
    assert "--logits-save-dir requires --async-save" in problem
    assert "--use-persistent-ckpt-worker" in problem


def test_saving_without_frozen_teacher_warns() -> None:
    problems, [warning] = outcome([a for a in SAVING if a != "--freeze-all-layers"])
    assert problems == []
    assert "--freeze-all-layers" in warning and warning.startswith("[distillation]")


def test_saving_excludes_batch_rampup() -> None:
    [problem], _ = outcome(SAVING + ["--rampup-batch-size", "16", "16", "1000"])
    assert "--rampup-batch-size" in problem and "fixed global batch size" in problem


@pytest.mark.parametrize("value, ok", [("0", False), ("-0.5", False), ("1.5", False),
                                       ("0.9", True), ("1", True)])
def test_top_p_out_of_range_only_warns(value: str, ok: bool) -> None:
    # Megatron's validation never checks the top-p range (the help text only asks for it).
    problems, warnings = outcome(SAVING + ["--logits-save-top-p", value])
    assert problems == []
    if ok:
        assert warnings == []
    else:
        [warning] = warnings
        assert f"--logits-save-top-p {float(value):g} is outside (0, 1]" in warning


def test_blocked_plugin_names_itself() -> None:
    blocked, rest = megaplug.load(["-p", "no:distillation", "--logits-load-dir", "/x"])
    assert blocked.plugins.records["distillation"].status == "blocked"
    with pytest.raises(megaplug.ConfigError) as info:
        blocked.resolve(rest, environ={})
    [problem] = [p for p in info.value.problems if "--logits-load-dir" in p.message]
    assert problem.plugin == "distillation"
    assert "plugin 'distillation'" in problem.message and "blocked" in problem.message
