"""``--use-checkpoint-args``: the architecture settings saved in a checkpoint.

Megatron's ``parse_and_validate_args`` loads them between parsing and validation
(``load_args_from_checkpoint``), ``--pretrained-checkpoint`` first and ``--load`` second
(so it wins); a directory without a checkpoint only warns unless
``--exit-on-missing-checkpoint`` is set. Problems are the checkpointing plugin's, whose
flags these are.
"""

from __future__ import annotations

import argparse

from . import _checkpoint
from .._config import Provenance
from .._errors import Problem, ProblemSink
from .._kernel import Kernel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

_PLUGIN = "checkpointing"


def load_checkpoint_args(args: argparse.Namespace, kernel: Kernel,
                         provenance: dict[str, Provenance], sink: ProblemSink, *,
                         asked_by_caller_only: bool) -> None:
    """Apply the saved arguments of ``--pretrained-checkpoint`` then ``--load`` to ``args``.

    The checkpointing plugin reports a missing or local checkpoint when the flag is given;
    only a request made through ``args_defaults`` alone is reported here.
    """
    if getattr(args, "load", None) is None and getattr(args, "pretrained_checkpoint", None) is None:
        if asked_by_caller_only:
            sink.add(Problem("use_checkpoint_args (from the caller's defaults) needs a "
                             "checkpoint to read", ("--load",),
                             "add --load DIR (or --pretrained-checkpoint DIR)", _PLUGIN))
        return
    if getattr(args, "non_persistent_ckpt_type", None) == "local":
        if asked_by_caller_only:
            sink.add(Problem("use_checkpoint_args (from the caller's defaults) cannot read "
                             "local non-persistent checkpoints", ("--non-persistent-ckpt-type",),
                             "use --non-persistent-ckpt-type global, or pass the arguments "
                             "explicitly", _PLUGIN))
        return
    allowed = _checkpoint.declared_enum_types(kernel)
    for load_arg in ("pretrained_checkpoint", "load"):
        load_dir = getattr(args, load_arg, None)
        if load_dir is not None:
            _apply_one(args, kernel, provenance, load_dir, load_arg, allowed, sink)


def _checkpoint_path(args: argparse.Namespace, load_dir: str, flag: str,
                     sink: ProblemSink) -> Path | None:
    """The checkpoint file under ``load_dir``; none found is a warning (the arguments are
    kept as given), or a problem under ``--exit-on-missing-checkpoint``."""
    try:
        return _checkpoint.checkpoint_file(load_dir)
    except _checkpoint.CheckpointArgsError as exc:
        if getattr(args, "exit_on_missing_checkpoint", False):
            sink.add(Problem(str(exc), ("--use-checkpoint-args", flag,
                                        "--exit-on-missing-checkpoint"),
                             f"point {flag} at a checkpoint directory, "
                             "or drop --exit-on-missing-checkpoint", _PLUGIN))
        else:
            sink.warnings.append(Problem(f"{exc}; keeping the arguments as given", (flag,),
                                         plugin=_PLUGIN))
        return None


def _apply_one(args: argparse.Namespace, kernel: Kernel, provenance: dict[str, Provenance],
               load_dir: str, load_arg: str, allowed: list[type], sink: ProblemSink) -> None:
    flag = "--" + load_arg.replace("_", "-")
    path = _checkpoint_path(args, load_dir, flag, sink)
    if path is None:
        return
    try:
        state = _checkpoint.load_saved_state(path, allowed)
    except _checkpoint.CheckpointArgsError as exc:
        sink.add(Problem(str(exc), ("--use-checkpoint-args", flag),
                         f"point {flag} at a checkpoint directory written by a trusted run",
                         _PLUGIN))
        return
    version = state.get("checkpoint_version", 0) or 0
    if type(version) not in (int, float):
        sink.add(Problem(f"{path}: checkpoint_version is {version!r}, not a number; the "
                         "checkpoint is corrupt or was not written by Megatron",
                         ("--use-checkpoint-args", flag),
                         f"point {flag} at a checkpoint written by Megatron", _PLUGIN))
        return

    def convert(name: str, raw: object) -> object:
        return kernel.convert(name, raw, source="checkpoint", detail=str(path))

    changed, problems = _checkpoint.apply_checkpoint_args(
        vars(args), state["args"], float(version),
        bool(getattr(args, "use_mp_args_from_checkpoint_args", False)), convert)
    for name, problem in problems.items():
        sink.add(problem)
        sink.doubtful.add(name)  # what follows from a refused value is not reported
    for name, value in changed.items():
        provenance[name] = Provenance("checkpoint", str(load_dir), kernel.table.owner(name),
                                      previous=provenance.get(name), value=value)
