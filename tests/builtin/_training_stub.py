"""Test support: resolve with the training plugin and a small stand-in for its neighbours.

The stand-in is named ``parallel`` (the plugin training runs after) and declares the few
settings of other plugins that training reads, so these tests do not depend on how the
other built-in plugins are progressing.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Optional

import pytest
from typing_extensions import Annotated

import megaplug
from megaplug import Computed, Flag, FromEnv, PluginInfo, hookimpl
from megaplug.builtin import training

#: A minimal launch that the training plugin accepts.
BASE = ["--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4"]
ENV = {"WORLD_SIZE": "8", "RANK": "0"}


@dataclass
class NeighbourOptions:
    world_size: Annotated[int, FromEnv("WORLD_SIZE")] = 1
    tensor_model_parallel_size: int = 1
    data_parallel_size: Annotated[Optional[int], Computed("world / tensor parallel")] = None
    transformer_impl: str = "transformer_engine"
    add_bias_linear: Annotated[bool, Flag("--disable-bias-linear")] = True
    position_embedding_type: str = "learned_absolute"
    use_rotary_position_embeddings: bool = False
    fp16: bool = False
    loss_scale: Optional[float] = None
    fake_process_group: bool = False
    tp_comm_overlap: bool = False
    eval_global_batch_size: Optional[int] = None
    eval_micro_batch_size: Optional[int] = None
    ckpt_format: str = "torch_dist"
    use_distributed_optimizer: bool = False
    overlap_param_gather: bool = False


@hookimpl
def _add_args(flags: Any) -> None:
    flags.add_options(NeighbourOptions)


@hookimpl
def _derive(config: Any) -> None:
    config.set("data_parallel_size", config.world_size // config.tensor_model_parallel_size,
               inputs=("world_size", "tensor_model_parallel_size"))


neighbours = types.ModuleType("training_test_neighbours")
neighbours.megaplug_plugin = PluginInfo(name="parallel")  # type: ignore[attr-defined]
neighbours.add_args = _add_args  # type: ignore[attr-defined]
neighbours.derive = _derive  # type: ignore[attr-defined]

TARGET_PACKAGES = {"transformer_engine": "2.17.1", "torch": "2.13.0"}


def target(**packages: Optional[str]) -> megaplug.TargetEnvironment:
    return megaplug.TargetEnvironment(packages={**TARGET_PACKAGES, **packages},
                                      device_capability=(9, 0))


def kernel() -> Any:
    loaded, _ = megaplug.load([], environ={"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"},
                              builtins=[training, neighbours])
    return loaded


def resolve(*argv: str, env: Optional[dict[str, str]] = None, base: bool = True,
            packages: Optional[dict[str, Optional[str]]] = None) -> megaplug.Resolved:
    """Resolve ``BASE + argv`` with the training plugin and the stand-in."""
    tokens = [*BASE, *argv] if base else list(argv)
    return kernel().resolve(tokens, environ={**ENV, **(env or {})},
                            target=target(**(packages or {})))


def problems(*argv: str, env: Optional[dict[str, str]] = None, base: bool = True,
             packages: Optional[dict[str, Optional[str]]] = None) -> list[megaplug.Problem]:
    """The training plugin's problems for ``BASE + argv`` (the resolve must fail)."""
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(*argv, env=env, base=base, packages=packages)
    return [p for p in info.value.problems if p.plugin == "training"]


def messages(*argv: str, **kwargs: Any) -> str:
    return "\n".join(p.message for p in problems(*argv, **kwargs))


def warnings(resolved: megaplug.Resolved) -> str:
    return "\n".join(w.message for w in resolved.warnings)
