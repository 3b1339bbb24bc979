"""``megaplug memory [--rank R] [--format text|json] [--assume-device-memory SIZE] -- ARGS``.

Resolves ARGS as ``megaplug resolve`` does (``WORLD_SIZE`` is the job's size), then hands
the resolved values and the target GPU's memory to the memory estimator a plugin
distribution provides. The command line knows no estimator itself: a distribution offers
one under the ``megaplug.memory`` entry-point group, as ``megaplug-memory`` does::

    [project.entry-points."megaplug.memory"]
    report = "megaplug_memory.report:memory_report"

``report(values, device_memory_bytes, rank, environ=..., moe_imbalance=...)`` receives the
resolved values (Megatron's names), the device's memory in bytes (``None`` when unknown),
the one rank asked for (``None``: all), the job's environment (``PYTORCH_CUDA_ALLOC_CONF``:
``--assume-alloc-conf``, else this process's) and ``--assume-moe-imbalance`` as given
(``None``: the estimator's default), and returns an object with ``as_dict()`` (the JSON answer) and
``as_text()`` (the table), or raises ``ValueError`` saying why it cannot (exit 2). The
target's memory is ``--assume-device-memory``, else the GPU NVML sees here, else unknown
(no verdict).
"""

from __future__ import annotations

import os
import sys

from ..values._encoding import to_json
from ._parser import EXIT_OK, UsageError
from ._shared import config_tokens, defaults_from, plugin_controls, target_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, Callable

GROUP = "megaplug.memory"
_INSTALL = "pip install megaplug-memory (or plugins/megaplug-memory in this repository)"


def estimator() -> Callable[..., Any]:
    """The ``report`` entry point of the ``megaplug.memory`` group, loaded."""
    from ..cache._entry_points import group_entry_points

    found = [entry for entry in group_entry_points(GROUP) if entry.name == "report"]
    if not found:
        raise UsageError(f"megaplug memory: no memory estimator is installed ({_INSTALL})")
    return found[0].load()  # type: ignore[no-any-return]


def run_memory(options: argparse.Namespace, args: list[str]) -> int:
    """The ``memory`` command: print the estimate; the exit code (2 for a bad configuration)."""
    from ..megatron import parse_and_validate_args

    report = estimator()
    target = target_from(options)
    # the memory check is pre-flight's: it would refuse the very configuration this command
    # is asked to size, so the resolve here leaves pre-flight out
    namespace = parse_and_validate_args(
        argv=[*plugin_controls(options), *config_tokens(options), *args], environ=os.environ,
        args_defaults=defaults_from(options), target=target, torch_types=False,
        register=False, preflight=False)
    values = vars(namespace)
    world_size = int(values.get("world_size") or 1)
    if options.rank is not None and not 0 <= options.rank < world_size:
        raise UsageError(f"megaplug memory: --rank {options.rank} is not a rank of a job of "
                         f"{world_size} (WORLD_SIZE); give 0 to {world_size - 1}")
    try:
        result = report(values, target.memory(), options.rank, **assumed(options))
    except ValueError as exc:
        raise UsageError(f"megaplug memory: {exc}") from None
    if options.format == "json":
        sys.stdout.write(_one_rank_a_line(result.as_dict()))
    else:
        sys.stdout.write(result.as_text())
    return EXIT_OK


def assumed(options: argparse.Namespace) -> dict[str, Any]:
    """The estimator's keyword arguments for what the run is assumed to be: the job's
    environment (``--assume-alloc-conf`` standing for its ``PYTORCH_CUDA_ALLOC_CONF``) and
    ``--assume-moe-imbalance`` as given."""
    environ = dict(os.environ)
    if options.assume_alloc_conf is not None:
        environ["PYTORCH_CUDA_ALLOC_CONF"] = options.assume_alloc_conf
    return {"environ": environ, "moe_imbalance": options.assume_moe_imbalance}


def _one_rank_a_line(answer: dict[str, Any]) -> str:
    """The JSON answer with each rank on a line of its own: readable, and a job of thousands
    of ranks prints quickly: indenting every field of every rank took about ten times as
    long (docs/memory.md and docs/performance.md have the figures)."""
    encoded: dict[tuple[Any, ...], str] = {}  # the ranks of one role share all but their number

    def line(row: dict[str, Any]) -> str:
        key = (row["peak_allocated_bytes"], row["fits"], id(row["parts"]))
        if key not in encoded:
            rest = {name: value for name, value in row.items() if name != "rank"}
            encoded[key] = to_json(rest, indent=None)[1:]
        return f'  {{"rank": {int(row["rank"])}, {encoded[key]}'

    rows = ",\n".join(line(row) for row in answer["ranks"])
    head = ", ".join(f'"{name}": {to_json(value, indent=None)}'
                     for name, value in answer.items() if name != "ranks")
    return f'{{{head}, "ranks": [\n{rows}\n]}}\n'
