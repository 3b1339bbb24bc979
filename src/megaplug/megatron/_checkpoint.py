"""Reading the arguments saved in a Megatron-layout checkpoint (``--use-checkpoint-args``).

A checkpoint is a pickle. megaplug reads it with ``torch.load(weights_only=True)`` and an
explicit allow-list: ``argparse.Namespace``, the enum classes megaplug's plugins declare,
and what torch's restricted unpickler already accepts (tensors, dtypes, plain containers).
Anything else — a ``__reduce__`` that would call ``os.system``, a foreign class — is
refused with a clear error before any of it is constructed.
"""

from __future__ import annotations

import enum
import os

from .._errors import Problem

TYPE_CHECKING = False
if TYPE_CHECKING:  # pathlib (and the urllib.parse it imports) would cost every resolve
    from typing import Any, Callable, Iterable
    from pathlib import Path

TRACKER_FILENAME = "latest_checkpointed_iteration.txt"

#: Settings taken from the checkpoint only where the command line left them unset.
FILL_IF_UNSET = (
    "num_layers", "hidden_size", "ffn_hidden_size", "seq_length", "num_attention_heads",
    "kv_channels", "max_position_embeddings", "tokenizer_type", "padded_vocab_size",
    "num_layers_per_virtual_pipeline_stage",
)
#: Settings the checkpoint always decides: they define the saved model's shape.
FORCED = (
    "num_query_groups", "group_query_attention", "position_embedding_type",
    "add_position_embedding", "use_rotary_position_embeddings", "rotary_base",
    "rotary_percent", "rotary_interleaved", "add_bias_linear", "add_qkv_bias",
    "squared_relu", "swiglu", "untie_embeddings_and_output_weights", "apply_layernorm_1p",
    "normalization", "apply_query_key_layer_scaling",
)
#: Parallel layout, forced when the checkpoint format records it (version >= 3).
PARALLEL_FORCED = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size", "expert_model_parallel_size",
)


class CheckpointArgsError(ValueError):
    """The checkpoint's saved arguments cannot be found or safely read."""


#: A tracker holds an iteration number or ``release``: a few bytes.
MAX_TRACKER_BYTES = 4096
#: Iteration directories are ``iter_%07d``; no run reaches 10**18 iterations.
MAX_ITERATION_DIGITS = 18
#: The first bytes of the two formats ``torch.save`` writes: a zip archive (torch >= 1.6)
#: and the legacy pickle stream (protocol 2, which the legacy format always uses).
_CHECKPOINT_MAGIC = (b"PK\x03\x04", b"\x80\x02")


def checkpoint_file(load_dir: str | os.PathLike[str]) -> Path:
    """The file holding the saved arguments for the latest iteration in ``load_dir``.

    The tracker is read as an untrusted file (regular, a few bytes, never blocking); what
    it holds must be ASCII digits or ``release``, as Megatron writes it.
    """
    from pathlib import Path

    from ..sources._files import UntrustedInputError, read_regular_file

    directory = Path(load_dir)
    tracker = directory / TRACKER_FILENAME
    if not os.path.lexists(tracker):
        raise CheckpointArgsError(
            f"no checkpoint found: {tracker} does not exist or cannot be read")
    try:
        data = read_regular_file(tracker, "checkpoint tracker", MAX_TRACKER_BYTES)
    except UntrustedInputError as exc:
        raise CheckpointArgsError(f"no checkpoint found: {exc}") from None
    iteration_dir = directory / _iteration_dir_name(tracker, data)
    for candidate in (iteration_dir / "mp_rank_00" / "model_optim_rng.pt",
                      iteration_dir / "mp_rank_00_000" / "model_optim_rng.pt",
                      iteration_dir / "common.pt"):
        if candidate.is_file():
            return candidate
    raise CheckpointArgsError(f"no saved arguments in {iteration_dir} (looked for "
                              "mp_rank_00/model_optim_rng.pt and common.pt)")


def _iteration_dir_name(tracker: Path, data: bytes) -> str:
    """The directory the tracker's text names: ``release``, or ``iter_`` and the iteration."""
    try:
        marker = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise CheckpointArgsError(f"{tracker} holds bytes that are not ASCII text, not an "
                                  "iteration number or 'release'") from None
    if marker == "release":
        return "release"
    if marker.isdigit() and len(marker) <= MAX_ITERATION_DIGITS:
        return f"iter_{int(marker):07d}"
    if marker.isdigit():
        raise CheckpointArgsError(f"{tracker} holds a {len(marker)}-digit number; an "
                                  f"iteration number has at most {MAX_ITERATION_DIGITS}")
    shown = marker if len(marker) <= 40 else marker[:40] + "..."
    raise CheckpointArgsError(f"{tracker} holds {shown!r}, not an iteration number "
                              "or 'release'")


def load_saved_state(path: Path, allowed: Iterable[type]) -> dict[str, Any]:
    """``torch.load`` in weights-only mode with an explicit allow-list of extra types.

    Besides ``allowed``: ``signal.Signals`` (``exit_signal``), and for each allowed enum
    that stands in for a Megatron class (``__megatron_type__``), that class's name read as
    the stand-in -- a checkpoint saved by Megatron loads without megatron.core installed.
    Only a regular file is opened; one that is empty, or is neither of torch's formats,
    or that torch cannot read through is reported as corrupt, apart from one that holds
    objects outside the allow-list.
    """
    import argparse

    import torch

    from ..sources._files import UntrustedInputError, open_regular_file

    safe = _safe_globals(list(allowed))
    try:
        handle = open_regular_file(path, "checkpoint file")
    except UntrustedInputError as exc:
        raise CheckpointArgsError(str(exc)) from None
    # safe_globals() drops the listed types from torch's process-wide allow-list on exit,
    # even those registered before (megatron.core registers Namespace): restore the list.
    registered = list(torch.serialization.get_safe_globals())
    with handle:
        _check_format(path, handle)
        try:
            with torch.serialization.safe_globals(safe):
                state = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception as exc:  # torch raises UnpicklingError / RuntimeError variants
            raise _load_error(path, exc) from None
        finally:
            torch.serialization.clear_safe_globals()
            torch.serialization.add_safe_globals(registered)
    if not isinstance(state, dict) or not isinstance(state.get("args"), argparse.Namespace):
        raise CheckpointArgsError(f"{path} does not hold saved arguments ('args')")
    return state


def _safe_globals(allowed: list[type]) -> list[Any]:
    """torch's allow-list for saved arguments: ``allowed``, ``Namespace``, ``Signals``, and
    each stand-in enum under the name of the Megatron class it stands in for."""
    import argparse
    import signal

    safe: list[Any] = [argparse.Namespace, signal.Signals, *allowed]
    safe += [(cls, cls.__megatron_type__.replace(":", ".")) for cls in allowed
             if isinstance(getattr(cls, "__megatron_type__", None), str)]
    return safe


def _check_format(path: Path, handle: Any) -> None:
    """Refuse a file that is empty or neither of ``torch.save``'s formats, before torch
    tries it (its errors for those read like a refused type)."""
    start = handle.read(4)
    handle.seek(0)
    if not start:
        raise CheckpointArgsError(f"cannot read {path}: the file is empty (a checkpoint "
                                  "whose writing was cut short?)")
    if not start.startswith(_CHECKPOINT_MAGIC):
        raise CheckpointArgsError(f"cannot read {path}: it is not a checkpoint torch.save "
                                  "wrote (neither a zip archive nor a pickle); the file is "
                                  "corrupt or of another kind")


def _load_error(path: Path, exc: Exception) -> CheckpointArgsError:
    """The error for a failed ``torch.load``: a refused type is named as such; anything
    else (a truncated archive, a damaged pickle) means the file is corrupt."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    # torch names a refused class or function "Unsupported global: GLOBAL x.y" or
    # "unsupported GLOBAL x.y whose module x is blocked"; a bad opcode is damage
    detail = next((line for line in lines if "global" in line.lower()
                   and "unsupported" in line.lower()), None)
    if detail is not None:
        return CheckpointArgsError(
            f"refusing to read {path}: it contains objects outside the allow-list of "
            f"checkpoint types ({detail})")
    shown = next((line for line in lines if "Unsupported" in line), lines[0] if lines else "")
    return CheckpointArgsError(f"cannot read {path}: the file is corrupt or truncated "
                               f"({type(exc).__name__}{': ' + shown if shown else ''})")


def enum_types(values: Iterable[Any]) -> list[type]:
    """Enum classes among declared defaults and choices: the types a checkpoint may carry."""
    found: dict[type, None] = {}
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, enum.Enum):
                found[type(item)] = None
    return list(found)


def declared_enum_types(kernel: Any) -> list[type]:
    """Every enum class a kernel's active plugins declare (in defaults and choices) or
    define: the types a checkpoint's saved arguments may carry."""
    declared = [spec.default for spec in kernel.table]
    declared += [choice for spec in kernel.table for choice in (spec.choices or ())]
    return enum_types(declared) + plugin_enum_types(
        record.module for record in kernel.plugins.active() if record.module is not None)


def plugin_enum_types(modules: Iterable[Any]) -> list[type]:
    """Enum classes defined in the packages of the given plugin modules.

    A plugin may derive an enum that no flag declares (a string flag turned into an
    enum member), and a run saves it; these classes are the plugins' own code. Every module
    of each package is imported to find them (once per process), so the answer is the
    installed code alone -- never which of its modules this process happened to import
    by now (a warm cache imports fewer than a cold one).
    """
    packages = sorted({getattr(m, "__package__", None) or getattr(m, "__name__", "")
                       for m in modules} - {""})
    found: dict[type, None] = {}
    for package in packages:
        if package not in _PACKAGE_ENUMS:
            _PACKAGE_ENUMS[package] = _enums_of_package(package)
        found.update(dict.fromkeys(_PACKAGE_ENUMS[package]))
    return list(found)


#: Enum classes per plugin package, found once per process.
_PACKAGE_ENUMS: dict[str, list[type]] = {}


def _enums_of_package(package: str) -> list[type]:
    """The enum classes defined in ``package`` and every module below it, in name order.

    A module that fails to import is skipped (it fails alike in every process); ``__main__``
    modules (a program, not definitions) and test modules are not imported.
    """
    import importlib
    import pkgutil

    found: dict[type, None] = {}
    pending = [package]
    while pending:
        name = pending.pop(0)
        try:
            module = importlib.import_module(name)
        except (Exception, SystemExit):  # noqa: BLE001 -- a broken module defines nothing
            continue
        for value in list(vars(module).values()):
            if (isinstance(value, type) and issubclass(value, enum.Enum)
                    and value.__module__ == name):
                found[value] = None
        path = getattr(module, "__path__", None)
        if path is None:
            continue
        pending += sorted(f"{name}.{info.name}" for info in pkgutil.iter_modules(path)
                          if info.name != "__main__" and info.name != "conftest"
                          and not info.name.startswith("test"))
    return list(found)


def apply_checkpoint_args(values: dict[str, Any], saved: Any, version: float,
                          use_parallel_layout: bool, convert: Callable[[str, Any], Any],
                          ) -> tuple[dict[str, Any], dict[str, Problem]]:
    """Copy architecture settings from ``saved`` into ``values`` (Megatron's rules).

    Each saved value goes through ``convert(name, raw)`` -- the kernel's one conversion and
    type check, as for every other source -- which returns the value or a problem.
    Returns (the settings that were changed, for provenance; the problems, by setting).
    """
    changed: dict[str, Any] = {}
    problems: dict[str, Problem] = {}

    def take(name: str, force: bool, old_name: str | None = None) -> None:
        if not force and values.get(name) is not None:
            return
        raw = getattr(saved, old_name or name, None)
        if raw is None:
            return
        value = convert(name, raw)
        if isinstance(value, Problem):
            problems[name] = value
            return
        values[name] = value
        changed[name] = value

    if hasattr(saved, "disable_bias_linear"):  # an older run's spelling
        disable = saved.disable_bias_linear
        # a value that is not a bool is kept as it is, for the type check to report
        saved.add_bias_linear = not disable if disable is None or isinstance(disable, bool) \
            else disable
    for name in FILL_IF_UNSET:
        take(name, force=False)
    for name in FORCED:
        take(name, force=True)
    if version < 3.0:
        take("tensor_model_parallel_size", force=False, old_name="model_parallel_size")
    elif use_parallel_layout:
        for name in PARALLEL_FORCED:
            take(name, force=True)
    return changed, problems
