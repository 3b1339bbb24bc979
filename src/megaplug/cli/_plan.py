"""``megaplug plan --gpus N [...] -- MODEL FLAGS``: the layouts that fit, ranked by cost.

Resolves the model's flags once (one rank, no layout), then hands the resolved values to the
planner a plugin distribution provides under the ``megaplug.plan`` entry-point group, as
``megaplug-memory`` does::

    [project.entry-points."megaplug.plan"]
    plan = "megaplug_memory.plan:plan_report"

``plan(values, gpus, model_argv=..., validate=..., environ=..., **options)`` returns an object with
``as_dict()`` and ``as_text(explain)``, or raises ``ValueError`` (exit 2). ``validate(argv)``
is this module's: a full resolve of one candidate command line for the job (``WORLD_SIZE``
= N, the device's memory, pre-flight on) that returns its first problem, or None.
"""

from __future__ import annotations

import os
import sys

from ._parser import EXIT_OK, UsageError
from ._shared import config_tokens, defaults_from, plugin_controls, target_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

GROUP = "megaplug.plan"
_INSTALL = "pip install megaplug-memory (or plugins/megaplug-memory in this repository)"


def planner() -> Callable[..., Any]:
    """The ``plan`` entry point of the ``megaplug.plan`` group, loaded."""
    from ..cache._entry_points import read_entry_points

    entries = read_entry_points(GROUP)
    if entries is None:  # an unusual installation: ask importlib.metadata itself
        from .._startup import metadata

        entries = list(metadata().entry_points(group=GROUP))
    found = [entry for entry in entries if entry.name == "plan"]
    if not found:
        raise UsageError(f"megaplug plan: no planner is installed ({_INSTALL})")
    return found[0].load()  # type: ignore[no-any-return]


def run_plan(options: argparse.Namespace, args: list[str]) -> int:
    """The ``plan`` command: print the ranked layouts; the exit code."""
    from ._memory import assumed

    if options.gpus < 1 or options.gpus_per_node < 1 or options.top < 1:
        raise UsageError("megaplug plan: --gpus, --gpus-per-node and --top must be positive")
    make_plan = planner()
    if options.device_memory is not None:
        options.assume_device_memory = options.device_memory
    target = target_from(options)
    if target.memory() is None:
        raise UsageError("megaplug plan: the GPUs' memory is unknown here: give "
                         "--device-memory SIZE (79.2GiB for an 80 GB H100)")
    target.environ = _job_environment(options)
    batch = ["--global-batch-size", str(options.global_batch_size)] if (
        options.global_batch_size) else []
    resolver = _Resolver(options, target)
    model = [*args, *batch]
    try:
        result = make_plan(resolver.base(model), options.gpus,
                           gpus_per_node=options.gpus_per_node, device_memory=target.memory(),
                           global_batch=options.global_batch_size, top=options.top,
                           validate=resolver.first_problem, model_argv=model,
                           cost=_cost_overrides(options),
                           resolve_options=_target_options(options), **assumed(options))
    except ValueError as exc:
        raise UsageError(f"megaplug plan: {exc}") from None
    if options.format == "json":
        from ..values._encoding import to_json

        sys.stdout.write(to_json(result.as_dict()) + "\n")
    else:
        sys.stdout.write(result.as_text(options.explain))
    return EXIT_OK


def _job_environment(options: argparse.Namespace) -> dict[str, str]:
    """This environment as the job's: its size, and the stated allocator and MoE routing."""
    environ = {**os.environ, "WORLD_SIZE": str(options.gpus), "RANK": "0"}
    if options.assume_alloc_conf is not None:
        environ["PYTORCH_CUDA_ALLOC_CONF"] = options.assume_alloc_conf
    if options.assume_moe_imbalance is not None:
        environ["MEGAPLUG_ASSUME_MOE_IMBALANCE"] = options.assume_moe_imbalance
    return environ


class _Resolver:
    """Resolves for the plan: the model alone once, then each candidate in full."""

    def __init__(self, options: argparse.Namespace, target: Any) -> None:
        self.controls = [*plugin_controls(options), *config_tokens(options)]
        self.defaults = defaults_from(options)
        self.target = target

    def base(self, model: list[str]) -> dict[str, Any]:
        """The model as one rank with no layout (its sizes; pre-flight judges each layout)."""
        from ..megatron import parse_and_validate_args

        one_rank = {**self.target.environ, "WORLD_SIZE": "1"}
        return vars(parse_and_validate_args(
            argv=[*self.controls, *model, "--micro-batch-size", "1"], environ=one_rank,
            args_defaults=self.defaults, target=self.target, torch_types=False,
            register=False, preflight=False))

    def first_problem(self, argv: list[str]) -> str | None:
        """A candidate's first problem for the job (validation, pre-flight), or None."""
        from .._errors import ConfigError
        from ..megatron import parse_and_validate_args

        try:
            parse_and_validate_args(argv=[*self.controls, *argv], environ=self.target.environ,
                                    args_defaults=self.defaults, target=self.target,
                                    torch_types=False, register=False, preflight=True)
        except ConfigError as exc:
            return exc.problems[0].message if exc.problems else "refused"
        return None


def _cost_overrides(options: argparse.Namespace) -> dict[str, float]:
    """``--peak-tflops``, ``--nvlink-gbps``, ``--network-gbps`` in the cost model's units."""
    given = (("peak_flops", options.peak_tflops, 1e12),
             ("nvlink_bandwidth", options.nvlink_gbps, 1e9),
             ("network_bandwidth", options.network_gbps, 1e9))
    return {name: value * unit for name, value, unit in given if value}


def _target_options(options: argparse.Namespace) -> list[str]:
    """The target the plan was made for, as ``megaplug resolve`` options (each row's)."""
    words = [word for item in options.assume for word in ("--assume", item)]
    if options.assume_device_capability is not None:
        words += ["--assume-device-capability", options.assume_device_capability]
    return words
