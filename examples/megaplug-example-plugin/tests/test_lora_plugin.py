"""The example plugin, installed as a distribution, working together with the built-ins.

Needs ``pip install -e examples/megaplug-example-plugin`` (scripts/setup.sh does it); the
tests are skipped with that instruction when the distribution is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata

import pytest

import megaplug
from megaplug.megatron import parse_and_validate_args

try:
    metadata.distribution("megaplug-example-plugin")
except metadata.PackageNotFoundError:  # pragma: no cover - depends on the environment
    pytest.skip("install it first: pip install -e examples/megaplug-example-plugin",
                allow_module_level=True)

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4"]
ENV = {"WORLD_SIZE": "1", "RANK": "0"}


def resolve(*extra: str, argv: tuple[str, ...] = ()) -> megaplug.Resolved:
    kernel, rest = megaplug.load(list(argv), environ=ENV)
    return kernel.resolve([*BASE, *rest, *extra], environ=ENV)


def problems(*extra: str, argv: tuple[str, ...] = ()) -> tuple[megaplug.Problem, ...]:
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*extra, argv=argv)
    return info.value.problems


def lora_messages(found: tuple[megaplug.Problem, ...]) -> list[str]:
    return [p.message for p in found if p.plugin == "lora"]


# -- discovery -----------------------------------------------------------------------


def test_loaded_from_its_entry_point_after_model() -> None:
    kernel, _ = megaplug.load([], environ=ENV)
    record = kernel.plugins.records["lora"]
    assert record.status == "active"
    assert record.distribution == "megaplug-example-plugin"
    assert record.entry_point == "lora = megaplug_lora"
    assert record.version == "0.1.0"
    assert record.hooks == ("add_args", "normalize", "derive", "validate")
    assert record.after == ("model",)
    order = kernel.plugins.order
    assert order.index("model") < order.index("lora")


def test_flags_are_declared_with_owner() -> None:
    kernel, _ = megaplug.load([], environ=ENV)
    spec = kernel.table.lookup("--lora-target-modules")
    assert spec.plugin == "lora" and spec.nargs == "+"
    assert spec.choices == ("linear_qkv", "linear_proj", "linear_fc1", "linear_fc2")
    assert kernel.table.lookup("--lora-r").hidden


def test_megaplug_list_shows_it() -> None:
    listed = subprocess.run([sys.executable, "-m", "megaplug", "list", "--json"],
                            capture_output=True, text=True, timeout=120)
    if listed.returncode != 0 and "invalid choice" in listed.stderr:
        pytest.skip("this megaplug has no list command")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    records = data if isinstance(data, list) else data.get("plugins", [])
    lora = next(r for r in records if r["name"] == "lora")
    assert lora["distribution"] == "megaplug-example-plugin"
    assert lora["status"] == "active"


# -- resolving ---------------------------------------------------------------------------


def test_defaults_without_adapters() -> None:
    resolved = resolve()
    assert resolved.lora_rank is None
    assert resolved.lora_scaling is None
    assert resolved.lora_target_modules == ["linear_qkv", "linear_proj"]
    assert "lora_r" not in resolved


def test_flags_resolve_and_scaling_is_derived() -> None:
    resolved = resolve("--lora-rank", "8", "--lora-alpha", "32", "--lora-dropout", "0.1",
                       "--lora-target-modules", "linear_qkv", "linear_fc1")
    assert resolved.lora_rank == 8
    assert resolved.lora_target_modules == ["linear_qkv", "linear_fc1"]
    assert resolved.lora_scaling == 4.0
    source = resolved.source("lora_scaling")
    assert (source.source, source.plugin, source.inputs) == ("derived", "lora",
                                                             ("lora_alpha", "lora_rank"))


def test_config_file_and_options_dataclass(tmp_path) -> None:
    path = tmp_path / "lora.yaml"
    path.write_text("lora_rank: 4\nlora_target_modules: [linear_fc2]\n")
    kernel, _ = megaplug.load([], environ=ENV)
    resolved = kernel.resolve(BASE, config_files=[str(path)], environ=ENV)
    options = resolved.options("lora")
    assert (options.lora_rank, options.lora_target_modules) == (4, ["linear_fc2"])
    assert options.lora_scaling == 4.0


def test_deprecated_alias_is_migrated_with_warning_and_provenance() -> None:
    resolved = resolve("--lora-r", "4")
    assert resolved.lora_rank == 4
    assert resolved.lora_scaling == 4.0
    assert "lora_r" not in resolved
    source = resolved.source("lora_rank")
    assert (source.source, source.plugin, source.inputs) == ("normalized", "lora", ("lora_r",))
    assert "deprecated" in source.reason
    assert any(w.plugin == "lora" and "--lora-r is deprecated" in w.message
               for w in resolved.warnings)


def test_alias_conflicting_with_new_spelling() -> None:
    found = problems("--lora-r", "4", "--lora-rank", "8")
    assert lora_messages(found) == ["--lora-r 4 and --lora-rank 8 disagree"]


def test_megatron_facade_namespace() -> None:
    args = parse_and_validate_args(argv=[*BASE, "--lora-r", "16"], environ=ENV)
    assert args.lora_rank == 16 and args.lora_scaling == 1.0
    assert not hasattr(args, "lora_r")


# -- checks ------------------------------------------------------------------------------


def test_rank_must_be_below_hidden_size() -> None:
    found = problems("--lora-rank", "64")
    assert lora_messages(found) == ["--lora-rank 64 is not smaller than --hidden-size 64"]
    problem = next(p for p in found if p.plugin == "lora")
    assert problem.flags == ("--lora-rank", "--hidden-size")
    assert "below 64" in problem.hint
    assert resolve("--lora-rank", "63").lora_rank == 63


def test_rank_must_be_positive() -> None:
    assert lora_messages(problems("--lora-rank", "0")) == [
        "--lora-rank 0 must be a positive integer"]


@pytest.mark.parametrize("dropout, ok", [("0", True), ("0.99", True), ("1.0", False),
                                         ("-0.1", False)])
def test_dropout_range(dropout: str, ok: bool) -> None:
    extra = ("--lora-rank", "8", "--lora-dropout", dropout)
    if ok:
        assert resolve(*extra).lora_dropout == float(dropout)
    else:
        assert lora_messages(problems(*extra)) == [
            f"--lora-dropout {float(dropout)} is outside [0, 1)"]


def test_alpha_must_be_positive() -> None:
    assert lora_messages(problems("--lora-rank", "8", "--lora-alpha", "0")) == [
        "--lora-alpha 0.0 must be positive"]


def test_unknown_target_module_is_a_choice_error() -> None:
    found = problems("--lora-rank", "8", "--lora-target-modules", "linear_qkv", "router")
    assert any("--lora-target-modules" in p.message and "router" in p.message for p in found)


def test_settings_without_rank_warn() -> None:
    resolved = resolve("--lora-alpha", "8")
    assert any(w.plugin == "lora" and "--lora-alpha has no effect without --lora-rank"
               in w.message for w in resolved.warnings)


def test_errors_are_aggregated_with_the_core_ones() -> None:
    found = problems("--num-layers", "two", "--lora-rank", "64", "--lora-dropout", "1.5")
    core = [p for p in found if p.plugin != "lora"]
    assert any("--num-layers" in p.message and "'two'" in p.message for p in core)
    assert sorted(lora_messages(found)) == [
        "--lora-dropout 1.5 is outside [0, 1)",
        "--lora-rank 64 is not smaller than --hidden-size 64",
    ]


# -- blocking ----------------------------------------------------------------------------


def test_blocked_plugin_adds_nothing() -> None:
    kernel, _ = megaplug.load(["-p", "no:lora"], environ=ENV)
    assert kernel.plugins.records["lora"].status == "blocked"
    assert kernel.table.lookup("--lora-rank") is None
    resolved = resolve(argv=("-p", "no:lora"))
    assert "lora_rank" not in resolved and "lora_scaling" not in resolved


def test_blocked_plugin_flags_give_a_clear_error() -> None:
    found = problems("--lora-rank", "8", argv=("-p", "no:lora"))
    assert len(found) == 1
    assert found[0].message.startswith("--lora-rank belongs to plugin 'lora', which is blocked")
    assert "-p no:lora" in found[0].hint


def test_blocked_through_the_public_resolve() -> None:
    with pytest.raises(megaplug.ConfigError, match="belongs to plugin 'lora'"):
        megaplug.resolve([*BASE, "-p", "no:lora", "--lora-rank", "8"], environ=ENV)
