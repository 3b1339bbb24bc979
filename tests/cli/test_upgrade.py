"""``megaplug upgrade``: what changes for one launch between two Megatron releases, on real
differences between the releases' own parsers and validation."""

from __future__ import annotations

import json
import shlex

import pytest

from cli_support import VALID, run

#: No multi-storage client on the target, so MSC's opt-in check (0.18+) has a known answer.
NO_MSC = ("--assume", "multistorageclient=none")


def upgrade(capsys, old, new, *argv, options=()):
    return run(capsys, "upgrade", "--from", old, "--to", new, *NO_MSC, *options, "--", *VALID,
               *argv)


def report(capsys, old, new, *argv):
    code, out, err = upgrade(capsys, old, new, *argv, options=("--format", "json"))
    return code, json.loads(out)


def values(found):
    return {entry["setting"]: entry for entry in found["values"]}


def test_a_removed_flag_is_named_and_left_out_of_the_rewrite(capsys, clean_env):
    code, out, err = upgrade(capsys, "0.15.0", "0.19.2", "--use-legacy-models")
    assert code == 1, err
    assert "flags of this launch that 0.19.2 removed or renamed:\n" \
           "  --use-legacy-models: removed ([model] use_legacy_models)" in out
    code, out, _ = upgrade(capsys, "0.15.0", "0.19.2", "--use-legacy-models",
                           options=("--rewrite",))
    assert code == 1
    assert "--use-legacy-models" not in shlex.split(out)
    assert shlex.split(out) == VALID


def test_a_renamed_flag_gets_its_replacement(capsys, clean_env):
    code, found = report(capsys, "0.16.1", "0.17.1", "--disable-ckpt-fully-parallel-save")
    assert code == 1
    assert found["flags"] == [{
        "flag": "--disable-ckpt-fully-parallel-save", "setting": "ckpt_fully_parallel_save",
        "plugin": "checkpointing", "change": "renamed",
        "replacement": "--no-ckpt-fully-parallel-save", "given_in": "command line"}]
    code, out, _ = upgrade(capsys, "0.16.1", "0.17.1", "--disable-ckpt-fully-parallel-save",
                           options=("--rewrite",))
    assert shlex.split(out) == [*VALID, "--no-ckpt-fully-parallel-save"]


@pytest.mark.parametrize("old,new,setting,before,after", [
    ("0.15.0", "0.19.2", "eval_interval", 1000, None),
    ("0.17.1", "0.19.2", "data_parallel_sharding_strategy", "no_shard", "optim_grads_params"),
    ("0.19.0", "main", "muon_tp_mode", "blockwise", "duplicated"),
    ("0.19.0", "main", "rl_generation_lag", 0, None),
])
def test_a_changed_default_shows_old_and_new_with_its_plugin(capsys, clean_env, old, new,
                                                             setting, before, after):
    code, found = report(capsys, old, new)
    assert code == 1
    entry = values(found)[setting]
    assert entry["kind"] == "default"
    assert (entry["from"]["value"], entry["to"]["value"]) == (before, after)
    assert entry["to"]["provenance"] == f"declared default of {entry['plugin']}"


def test_a_changed_default_in_text(capsys, clean_env):
    code, out, _ = upgrade(capsys, "0.15.0", "0.19.2")
    assert code == 1
    assert "defaults that change:\n" in out
    assert "  [logging] eval_interval: 1000 -> null\n      declared default of logging\n" in out


@pytest.mark.parametrize(("version", "header"), [
    ("0.17.1", "megatron_core 0.17.1"),
    ("0.17.3", "megatron_core 0.17.3 (as 0.17.1; 0.17.3 was not measured: resolved as 0.17.1, "
               "the nearest earlier measured release)"),
    ("0.17.0rc1", "megatron_core 0.17.0rc1 (as 0.17.0; a pre-release of 0.17.0, resolved as "
                  "that release)")])
def test_the_header_names_the_release_in_force_and_why(capsys, clean_env, version, header):
    code, out, err = upgrade(capsys, version, "0.19.2")
    assert out.splitlines()[:2] == [f"from: {header}", "to:   megatron_core 0.19.2"], err


def test_a_validation_the_target_adds_rejects_the_launch(capsys, clean_env):
    flags = ("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl", "te")
    code, found = report(capsys, "0.17.1", "0.19.2", *flags)
    assert code == 1
    assert found["from"]["problems"] == []
    assert [p["plugin"] for p in found["rejected"]] == ["training"]
    assert "cross-entropy" in found["rejected"][0]["message"].lower()


def test_a_validation_the_target_drops_is_a_change_too(capsys, clean_env):
    flags = ("--optimizer", "muon", "--use-distributed-optimizer")
    code, found = report(capsys, "0.17.1", "0.19.2", *flags)
    assert code == 1
    assert [p["message"] for p in found["from"]["problems"]] == [
        "--optimizer muon does not support --use-distributed-optimizer in Megatron 0.17.1"]
    assert found["rejected"] == []
    layer_wise = [s for s in found["new_settings"]
                  if s["setting"] == "use_layer_wise_distributed_optimizer"]
    assert layer_wise and layer_wise[0]["value"] is True


def test_derived_settings_that_appear_are_listed(capsys, clean_env):
    code, found = report(capsys, "0.17.1", "0.18.2")
    assert code == 1
    appeared = {s["setting"]: s for s in found["new_settings"]}
    assert appeared["use_layer_wise_distributed_optimizer"]["value"] is False


def test_nothing_changes_within_a_release_line(capsys, clean_env):
    code, out, err = upgrade(capsys, "0.19.0", "0.19.2")
    assert code == 0, out + err
    assert out.endswith("nothing changes for this launch from 0.19.0 to 0.19.2\n")
    code, found = report(capsys, "0.19.0", "0.19.2")
    assert code == 0
    assert found["changes"] == 0


def test_json_shape(capsys, clean_env):
    code, found = report(capsys, "0.15.0", "0.19.2", "--use-legacy-models")
    assert code == 1
    assert set(found) == {"from", "to", "source", "flags", "values", "rejected",
                          "new_warnings", "removed_settings", "new_settings", "changes"}
    assert found["from"]["version"] == "0.15.0" and found["from"]["line"] == "0.15.0"
    assert found["to"]["version"] == "0.19.2" and found["to"]["line"] == "0.19.2"
    assert found["source"] == "command line"
    assert found["changes"] == (len(found["flags"]) + len(found["values"])
                                + len(found["rejected"]) + len(found["new_warnings"])
                                + len([s for s in found["removed_settings"]
                                       + found["new_settings"]
                                       if not (s["provenance"] or "").startswith(
                                           "declared default")]))
    for entry in found["values"]:
        assert set(entry) == {"setting", "plugin", "kind", "from", "to"}
        assert entry["kind"] in ("default", "derived", "value")


def test_the_rewrite_resolves_under_the_target(capsys, clean_env):
    launch = ("--use-legacy-models", "--ckpt-format", "torch", "--eval-interval", "500")
    code, out, _ = upgrade(capsys, "0.15.0", "0.19.2", *launch, options=("--rewrite",))
    assert code == 1
    rewritten = shlex.split(out)
    assert "--use-legacy-models" not in rewritten
    assert rewritten[-2:] == ["--eval-interval", "500"]
    code, _, err = run(capsys, "resolve", "--assume", "megatron_core=0.19.2", *NO_MSC, "--",
                       *rewritten)
    assert code == 0, err
    code, _, _ = run(capsys, "resolve", "--assume", "megatron_core=0.19.2", *NO_MSC, "--",
                     *VALID, *launch)
    assert code == 2  # the launch as it was is not valid under the target


def test_a_config_file_is_the_launch_too(capsys, clean_env, tmp_path):
    config = tmp_path / "launch.yaml"
    config.write_text("use_legacy_models: true\n")
    code, out, err = run(capsys, "upgrade", "--from", "0.15.0", "--to", "0.19.2", *NO_MSC,
                         "--format", "json", str(config), "--", *VALID)
    assert code == 1, err
    found = json.loads(out)
    assert found["source"] == f"config file {config}"
    removed = {s["setting"]: s for s in found["removed_settings"]}
    assert removed["use_legacy_models"]["given"] is True


def test_a_saved_resolve_output_is_the_launch_too(capsys, clean_env, tmp_path):
    # legacy models take only torch checkpoints in 0.15 (its validate_args asserts it)
    code, out, _ = run(capsys, "resolve", "--assume", "megatron_core=0.15.0", *NO_MSC, "--",
                       *VALID, "--use-legacy-models", "--ckpt-format", "torch")
    assert code == 0
    saved = tmp_path / "resolved.json"
    saved.write_text(out)
    code, out, err = run(capsys, "upgrade", "--from", "0.15.0", "--to", "0.19.2", *NO_MSC,
                         "--format", "json", str(saved), "--", *VALID)
    assert code == 1, err
    found = json.loads(out)
    assert found["source"] == f"saved resolve output {saved}"
    assert [f["flag"] for f in found["flags"]] == ["--use-legacy-models"]


@pytest.mark.parametrize("argv,message", [
    (("--from", "0.9.0", "--to", "0.19.2", "--", *VALID), "older than megaplug supports"),
    (("--from", "0.15.0", "--to", "banana", "--", *VALID), "is not a version"),
    (("--to", "0.19.2", "--", *VALID), "--from"),
    (("--from", "0.15.0", "--to", "0.19.2"), "which launch?"),
    (("--from", "0.15.0", "--to", "0.19.2", "--assume", "megatron_core=0.17.0", "--", *VALID),
     "leave it out of --assume"),
])
def test_usage_errors_exit_2(capsys, clean_env, argv, message):
    code, out, err = run(capsys, "upgrade", *argv)
    assert code == 2
    assert message in err
    assert out == ""


def test_a_launch_invalid_under_its_release_compares_only_that_releases_settings(capsys,
                                                                                 clean_env):
    # --disable-ckpt-fully-parallel-save is 0.16's spelling: 0.15 refuses it
    code, found = report(capsys, "0.15.0", "0.19.2", "--disable-ckpt-fully-parallel-save")
    assert code == 1
    assert [p["message"] for p in found["from"]["problems"]] == [
        "unrecognized argument --disable-ckpt-fully-parallel-save in command line"]
    assert "muon_tp_mode" not in values(found)  # a 0.16+ flag: not in 0.15's namespace
    assert "muon_tp_mode" in {s["setting"] for s in found["new_settings"]}


def test_a_checkpoints_saved_arguments_are_the_launch(capsys, clean_env, tmp_path):
    torch = pytest.importorskip("torch")
    from megaplug import TargetEnvironment, resolve

    target = TargetEnvironment(packages={"megatron_core": "0.15.0", "multistorageclient": None})
    saved = resolve([*VALID, "--use-legacy-models", "--ckpt-format", "torch",
                     "--eval-interval", "500"], environ={}, target=target).to_namespace(
                         torch_types=True)
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "iter_0000010" / "mp_rank_00").mkdir(parents=True)
    torch.save({"args": saved, "iteration": 10, "checkpoint_version": 3.0},
               checkpoint / "iter_0000010" / "mp_rank_00" / "model_optim_rng.pt")
    (checkpoint / "latest_checkpointed_iteration.txt").write_text("10")
    code, out, err = run(capsys, "upgrade", "--from", "0.15.0", "--to", "0.19.2", *NO_MSC,
                         "--format", "json", str(checkpoint))
    assert code == 1, err
    found = json.loads(out)
    assert found["source"] == f"checkpoint {checkpoint} (iteration 10)"
    assert [f["flag"] for f in found["flags"]] == ["--use-legacy-models"]
    # the run's own --eval-interval 500 is kept on both sides: no default change shows
    assert "eval_interval" not in values(found)
    assert values(found)["data_parallel_sharding_strategy"]["kind"] == "default"


# -- a saved source replays what its run gave, not what the release derived from it ----------

#: Flags whose resolved form differs from the given one (a dtype name, the weight-decay
#: pair derived from --weight-decay, encoder_* derived from their primaries).
SHAPED = ("--bf16", "--use-precision-aware-optimizer", "--main-grads-dtype", "bf16",
          "--exp-avg-dtype", "fp16", "--weight-decay", "0.1", "--lr", "1e-4")


def saved_output(capsys, tmp_path, version, *argv):
    code, out, err = run(capsys, "resolve", "--assume", f"megatron_core={version}", *NO_MSC,
                         "--", *VALID, *argv)
    assert code == 0, err
    saved = tmp_path / "resolved.json"
    saved.write_text(out)
    return saved


@pytest.mark.parametrize("version,argv", [
    ("0.19.2", ()),
    ("0.19.2", SHAPED),
    ("0.17.1", SHAPED),
    ("0.15.0", ("--use-legacy-models", "--ckpt-format", "torch", "--swiglu")),
])
def test_a_valid_saved_output_is_valid_again_under_its_own_release(capsys, clean_env, tmp_path,
                                                                    version, argv):
    saved = saved_output(capsys, tmp_path, version, *argv)
    code, out, err = run(capsys, "upgrade", "--from", version, "--to", version, *NO_MSC,
                         "--format", "json", str(saved))
    found = json.loads(out)
    assert found["from"]["problems"] == [], found["from"]["problems"]
    assert (code, found["changes"]) == (0, 0)


def test_a_saved_output_replays_exactly_the_given_flags(capsys, clean_env, tmp_path):
    import argparse

    from megaplug.cli._upgrade import replayed
    from megaplug.sources._config_files import load_config_file

    saved = saved_output(capsys, tmp_path, "0.19.2", *SHAPED)
    options = argparse.Namespace(from_version="0.19.2", assume=list(NO_MSC[1:]), plugins=[],
                                 defaults=None, assume_device_capability=None,
                                 assume_device_memory=None)
    values_saved = {k: v for k, v in load_config_file(str(saved)).items()
                    if not k.startswith("_")}
    given = replayed(options, values_saved, [], f"saved resolve output {saved}")
    assert given == {"num_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                     "seq_length": 128, "max_position_embeddings": 128, "micro_batch_size": 2,
                     "bf16": True, "use_precision_aware_optimizer": True,
                     "main_grads_dtype": "bf16", "exp_avg_dtype": "fp16",
                     "weight_decay": 0.1, "lr": 0.0001}


def test_a_saved_output_with_a_flag_the_target_removed_names_it(capsys, clean_env, tmp_path):
    saved = saved_output(capsys, tmp_path, "0.15.0", "--use-legacy-models", "--ckpt-format",
                         "torch")
    code, out, err = run(capsys, "upgrade", "--from", "0.15.0", "--to", "0.19.2", *NO_MSC,
                         str(saved))
    assert code == 1, err
    assert "  --use-legacy-models (in the saved source): removed ([model] use_legacy_models)" \
        in out
    assert "not valid under 0.15.0 either" not in out
    assert "replayed" not in out  # the replay's temporary file is never named


def test_a_checkpoint_of_a_valid_launch_is_valid_again(capsys, clean_env, tmp_path):
    torch = pytest.importorskip("torch")
    from megaplug import TargetEnvironment, resolve

    target = TargetEnvironment(packages={"megatron_core": "0.17.1", "multistorageclient": None})
    saved = resolve([*VALID, *SHAPED], environ={}, target=target).to_namespace(
        torch_types=True)
    checkpoint = tmp_path / "ckpt"
    (checkpoint / "iter_0000001" / "mp_rank_00").mkdir(parents=True)
    torch.save({"args": saved, "iteration": 1, "checkpoint_version": 3.0},
               checkpoint / "iter_0000001" / "mp_rank_00" / "model_optim_rng.pt")
    (checkpoint / "latest_checkpointed_iteration.txt").write_text("1")
    code, out, err = run(capsys, "upgrade", "--from", "0.17.1", "--to", "0.17.1", *NO_MSC,
                         "--format", "json", str(checkpoint))
    found = json.loads(out)
    assert found["from"]["problems"] == []
    assert (code, found["changes"]) == (0, 0)


def test_a_config_files_removed_key_is_a_removed_flag(capsys, clean_env, tmp_path):
    config = tmp_path / "launch.yaml"
    config.write_text("use_legacy_models: true\nckpt_format: torch\n")
    code, found = report(capsys, "0.15.0", "0.19.2", "--config", str(config))
    assert code == 1
    assert found["flags"] == [{"flag": "use_legacy_models", "setting": "use_legacy_models",
                               "plugin": "model", "change": "removed", "replacement": None,
                               "given_in": f"config file {config}"}]
    assert not [p for p in found["rejected"] if "unrecognized" in p["message"]]
    code, out, err = upgrade(capsys, "0.15.0", "0.19.2", "--config", str(config),
                             options=("--rewrite",))
    assert shlex.split(out) == [*VALID, "--config", str(config)]
    assert (f"config file {config} sets use_legacy_models, which the target release removed: "
            "edit the file") in err


# -- --rewrite keeps everything else as given ------------------------------------------------

@pytest.mark.parametrize("tokens", [
    ("--lr=-1",), ("--lr=-1e-4",), ("--clip-grad=-0.5",), ("--seed=7",),
])
def test_the_rewrite_keeps_a_flag_written_with_equals_as_one_token(capsys, clean_env, tokens):
    code, out, err = upgrade(capsys, "0.16.1", "0.17.1", *tokens,
                             "--disable-ckpt-fully-parallel-save", options=("--rewrite",))
    assert shlex.split(out) == [*VALID, *tokens, "--no-ckpt-fully-parallel-save"]


def test_the_rewrite_keeps_a_flag_only_the_target_has(capsys, clean_env):
    # --muon-tp-mode is new in 0.16: a 0.15 launch naming it is kept for 0.19.2, which takes it
    code, out, err = upgrade(capsys, "0.15.0", "0.19.2", "--muon-tp-mode", "duplicated",
                             options=("--rewrite",))
    assert shlex.split(out) == [*VALID, "--muon-tp-mode", "duplicated"]


def test_the_rewrite_keeps_and_names_what_neither_release_knows(capsys, clean_env):
    code, out, err = upgrade(capsys, "0.15.0", "0.19.2", "--no-such-flag", "3", "--seed", "7",
                             "--use-legacy-models", "stray", options=("--rewrite",))
    assert shlex.split(out) == [*VALID, "--no-such-flag", "3", "--seed", "7", "stray"]
    assert err.splitlines() == [
        "megaplug upgrade: left out --use-legacy-models: the target release removed it "
        "([model] use_legacy_models)",
        "megaplug upgrade: kept --no-such-flag 3 as given: a flag neither release has",
        "megaplug upgrade: kept stray as given: a value no flag takes"]


def test_the_rewrite_keeps_plugin_selection_where_it_was(capsys, clean_env):
    code, out, err = upgrade(capsys, "0.16.1", "0.17.1", "-p", "no:rl",
                             "--disable-ckpt-fully-parallel-save", "--seed", "3",
                             options=("--rewrite",))
    assert shlex.split(out) == [*VALID, "-p", "no:rl", "--no-ckpt-fully-parallel-save",
                                "--seed", "3"]


def test_the_rewrite_of_a_saved_source_gives_its_flags_for_the_target(capsys, clean_env,
                                                                      tmp_path):
    launch = ("--use-legacy-models", "--ckpt-format", "torch", "--window-size", "128,0",
              "--attention-backend", "flash", "--no-bias-gelu-fusion", "--data-path", "a",
              "b", "--split", "1,0,0", "--lr", "1e-4")
    saved = saved_output(capsys, tmp_path, "0.15.0", *launch)
    code, out, err = run(capsys, "upgrade", "--from", "0.15.0", "--to", "0.19.2", *NO_MSC,
                         "--rewrite", str(saved))
    assert code == 1
    assert "megaplug upgrade: left out --use-legacy-models" in err
    rewritten = shlex.split(out)
    assert "--use-legacy-models" not in rewritten
    code, out, err = run(capsys, "resolve", "--assume", "megatron_core=0.19.2", *NO_MSC, "--",
                         *rewritten)
    assert code == 0, err
    code, expected, _ = run(capsys, "resolve", "--assume", "megatron_core=0.19.2", *NO_MSC,
                            "--", *VALID, *launch[1:])
    assert json.loads(out) == json.loads(expected)
