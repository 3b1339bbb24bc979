"""Each feature plugin can be blocked (``-p no:NAME``) without breaking anything else.

For every feature plugin, a dense GPT launch resolves with that plugin blocked: the core
and every other plugin stay active and resolve exactly the values they resolve with
nothing blocked, the blocked plugin's settings are gone, and using one of its flags fails
with a message naming it.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

import megaplug

FEATURE_PLUGINS = ("moe", "mla", "fsdp", "gtp", "inference", "rl", "distillation", "kitchen")

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
TARGET = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                    device_capability=(9, 0))


def require_installed(name: str) -> None:
    """Fail (never skip) when a feature plugin's distribution is missing."""
    assert importlib.util.find_spec(f"megaplug_{name}") is not None, (
        f"megaplug-{name} is not installed: pip install -e plugins/megaplug-{name}")


def kernel(*argv: str) -> Any:
    return megaplug.load(list(argv), environ=ENVIRON)[0]


def resolve(*plugin_args: str) -> megaplug.Resolved:
    return megaplug.resolve([*plugin_args, *DENSE_GPT], environ=ENVIRON, target=TARGET)


@pytest.fixture(scope="module")
def unblocked() -> megaplug.Resolved:
    return resolve()


@pytest.mark.parametrize("name", FEATURE_PLUGINS)
def test_plugin_is_installed_and_active(name: str) -> None:
    require_installed(name)
    record = kernel().plugins.records.get(name)
    assert record is not None, f"feature plugin {name!r} is not installed"
    assert record.status in ("active", "unavailable"), (name, record.status, record.reason)


@pytest.mark.parametrize("name", FEATURE_PLUGINS)
def test_blocking_leaves_everything_else_active(name: str) -> None:
    require_installed(name)
    full, blocked = kernel(), kernel("-p", f"no:{name}")
    assert blocked.plugins.records[name].status == "blocked"
    for other, record in full.plugins.records.items():
        if other != name:
            assert blocked.plugins.records[other].status == record.status, other


@pytest.mark.parametrize("name", FEATURE_PLUGINS)
def test_dense_gpt_resolves_the_same_without_the_plugin(
        name: str, unblocked: megaplug.Resolved) -> None:
    require_installed(name)
    resolved = resolve("-p", f"no:{name}")
    assert name not in resolved.plugins
    assert set(resolved.plugins) == set(unblocked.plugins) - {name}
    owners = kernel().table
    own = {dest for dest in unblocked if owners.owner(dest) == name}
    assert not own & set(resolved), f"settings of blocked {name!r} still resolved"
    for dest in unblocked:
        if dest not in own:
            assert dest in resolved, f"{dest} (plugin {owners.owner(dest)}) lost"
            assert resolved[dest] == unblocked[dest], (
                f"{dest} (plugin {owners.owner(dest)}) changed when {name!r} is blocked")
    assert resolved.num_layers == 2 and resolved.hidden_size == 64
    assert resolved.data_parallel_size == 8


@pytest.mark.parametrize("name", FEATURE_PLUGINS)
def test_a_blocked_plugins_flag_names_the_plugin(name: str) -> None:
    require_installed(name)
    full = kernel()
    options = [spec.option_strings[0] for spec in full.table
               if spec.plugin == name and spec.kind == "flag"]
    # An unavailable plugin (missing optional package) declares no flags; the kernel
    # still knows their spellings to name the plugin.
    options += [option for option, record in full.inactive_flags.items() if record.name == name]
    assert options, f"plugin {name!r} declares no flags"
    option = options[0]
    # Blocked, the flag is unknown: the kernel skips the value after it, whatever its kind.
    argv = [option, "1"]
    with pytest.raises(megaplug.ConfigError) as info:
        megaplug.resolve(["-p", f"no:{name}", *DENSE_GPT, *argv],
                         environ=ENVIRON, target=TARGET)
    problems = info.value.problems
    assert len(problems) == 1, "\n".join(map(str, problems))
    problem = problems[0]
    assert problem.plugin == name
    assert option in problem.message and f"plugin {name!r}" in problem.message
    assert "blocked" in problem.message
