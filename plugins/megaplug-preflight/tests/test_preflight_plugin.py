"""The installed preflight distribution: discovery, switching it off, its table, staying light."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import megaplug
import megaplug_preflight
from megaplug_preflight.checks import CHECKS, FAMILIES
from preflight_launches import DENSE, ENVIRON, MOE, problems, target

#: The issue's example: six heads cannot be split over four tensor-parallel ranks.
SIX_HEADS_OVER_FOUR = ["--num-attention-heads", "6", "--kv-channels", "16",
                       "--tensor-model-parallel-size", "4"]
SOURCE = Path(megaplug_preflight.__file__).parent


def test_installed_plugin_is_active_and_only_validates():
    kernel, _ = megaplug.load([])
    record = kernel.plugins.records["preflight"]
    assert record.status == "active"
    assert record.distribution == "megaplug-preflight"
    assert set(record.hooks) == {"validate"}
    assert "preflight" not in {kernel.table.owner(dest) for dest in kernel.table.by_dest}


def test_issue_example_is_rejected_with_flags_and_hint():
    found = [p for p in problems(SIX_HEADS_OVER_FOUR) if p.plugin == "preflight"]
    assert len(found) == 1
    assert found[0].message == (
        "--num-attention-heads 6 cannot be split over --tensor-model-parallel-size 4; "
        "Megatron would raise this when building the model")
    assert found[0].flags == ("--num-attention-heads", "--tensor-model-parallel-size")
    assert found[0].hint == ("use a multiple of 4 heads, or a tensor parallel size that "
                             "divides 6: 1, 2, 3 or 6")


def test_blocked_plugin_leaves_validate_args_acceptance():
    assert problems(["-p", "no:preflight", *SIX_HEADS_OVER_FOUR]) == []


@pytest.mark.parametrize("value", ["0", "off", "False", "no "])
def test_environment_switch_silences_the_checks(value):
    assert problems(SIX_HEADS_OVER_FOUR, environ={**ENVIRON, "MEGAPLUG_PREFLIGHT": value}) == []


@pytest.mark.parametrize("value", ["1", "on", "yes", ""])
def test_environment_switch_on_values_keep_the_checks(value):
    found = problems(SIX_HEADS_OVER_FOUR, environ={**ENVIRON, "MEGAPLUG_PREFLIGHT": value})
    assert [p.plugin for p in found] == ["preflight"]


def test_every_problem_is_reported_at_once():
    found = problems([*SIX_HEADS_OVER_FOUR, *MOE, "--moe-router-topk", "1",
                      "--recompute-granularity", "full"])
    messages = " | ".join(p.message for p in found)
    assert "--num-attention-heads 6" in messages
    assert "--moe-router-pre-softmax" in messages
    assert "--recompute-granularity full needs --recompute-method" in messages


def test_layer_construction_problems_are_warnings():
    resolved = megaplug.resolve(
        [*DENSE, "--group-query-attention", "--num-query-groups", "4", "--num-attention-heads",
         "6", "--kv-channels", "16", "--ffn-hidden-size", "301",
         "--tensor-model-parallel-size", "2"], environ=ENVIRON, target=target())
    warned = [str(w) for w in resolved.warnings if w.plugin == "preflight"]
    assert warned == [
        "[preflight] --num-attention-heads 6 is not a multiple of --num-query-groups 4; "
        "Megatron would fail when building the model",
        "[preflight] --ffn-hidden-size 301 cannot be split over --tensor-model-parallel-size 2; "
        "Megatron would fail when building the model",
    ]


def test_version_checks_follow_the_stated_target():
    rope_fusion = ["--position-embedding-type", "rope"]
    assert problems(rope_fusion) == []
    missing = problems(rope_fusion, packages={"transformer_engine": None})
    assert any("RoPE fusion (on by default) requires transformer_engine >= 1.4, not installed"
               in p.message for p in missing)
    old = problems([*rope_fusion, "--rotary-interleaved"], packages={"transformer_engine": "2.2"})
    assert any("RoPE fusion requires transformer_engine >= 2.3, found 2.2" in p.message
               for p in old)


def test_transformer_engine_checks_are_skipped_when_the_target_is_unknown():
    """Not installed here and not stated: the cluster's version is unknown; no noise."""
    if megaplug.TargetEnvironment().package_version("transformer_engine") is not None:
        pytest.skip("Transformer Engine is installed on this machine")
    resolved = megaplug.resolve([*DENSE, "--position-embedding-type", "rope"], environ=ENVIRON,
                                target=target(packages={}))
    assert [w for w in resolved.warnings if w.plugin == "preflight"] == []
    assert resolved.apply_rope_fusion is True


def test_checks_are_named_documented_and_listed_once():
    checks = [check for family in FAMILIES.values() for check in family]
    names = [check.__name__ for check in checks]
    assert len(names) == len(set(names))
    assert checks == list(CHECKS)
    # one group, named by reference: imported only where the checks run
    group, = megaplug_preflight.megaplug_plugin.rules.steps["validate"]
    assert group.group == "megaplug_preflight.checks:CHECKS"
    declared = group.rules()
    assert [step.name for step in declared] == names
    assert {step.when for step in declared} == {megaplug_preflight.enabled}
    assert all(callable(check) and not check.__name__.startswith("_") for check in checks)
    for module in {inspect.getmodule(check) for check in checks}:
        assert module.__doc__, module.__name__


def _settings_read() -> set[str]:
    """Every setting name the checks read: ``config.get("x")`` and ``shown(config, "x")``."""
    names = set()
    for path in SOURCE.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "get" and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "config" and node.args
                    and isinstance(node.args[0], ast.Constant)):
                names.add(node.args[0].value)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id == "shown" and isinstance(node.args[1], ast.Constant)):
                names.add(node.args[1].value)
    return names


def test_every_setting_read_is_declared_by_a_plugin():
    """A misspelt setting would read as absent and silently disable its check."""
    kernel, _ = megaplug.load([])
    optional = {"kitchen_config_file", "kitchen_recipe_number"}  # need the kitchen package
    unknown = sorted(name for name in _settings_read() - optional if name not in kernel.table)
    assert unknown == []
    assert len(_settings_read()) > 100


def test_resolving_with_preflight_imports_neither_torch_nor_megatron():
    code = ("import sys, megaplug\n"
            "megaplug.resolve(sys.argv[1:], environ={'WORLD_SIZE': '8', "
            "'CUDA_DEVICE_MAX_CONNECTIONS': '1'}, target=megaplug.TargetEnvironment("
            "packages={'transformer_engine': '2.17.1'}, device_capability=(9, 0)))\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'megatron'))\n"
            "assert 'megaplug_preflight' in sys.modules\n"
            "print(heavy)\n")
    result = subprocess.run([sys.executable, "-c", code, *DENSE, *MOE], capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == "[]"
