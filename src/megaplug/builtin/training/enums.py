"""Value types of the training plugin: CUDA graph modules and exit signals."""

from __future__ import annotations

import enum
import signal


class CudaGraphModule(enum.Enum):
    """The parts of a layer that may be captured in a CUDA graph (Megatron's names)."""

    __megatron_type__ = "megatron.core.transformer.enums:CudaGraphModule"

    attn = 1
    mlp = 2
    moe = 3
    moe_router = 4
    moe_preprocess = 5
    mamba = 6


class CudaGraphScope(enum.Enum):
    """What ``--cuda-graph-scope`` captures in Megatron 0.16 and 0.17 (the setting that
    ``--cuda-graph-modules`` and ``--cuda-graph-impl full_iteration`` replaced in 0.18)."""

    __megatron_type__ = "megatron.core.transformer.enums:CudaGraphScope"

    full_iteration = 1
    attn = 2
    mlp = 3
    moe = 4
    moe_router = 5
    moe_preprocess = 6
    mamba = 7
    full_iteration_inference = 8  # 0.17 only (0.16's enum lacks it)


#: Retired ``--cuda-graph-modules`` spellings, kept as strings until normalize migrates them.
DEPRECATED_MODULE_SPELLINGS = ("full", "full_iteration", "full_iteration_inference")

CudaGraphModuleArg = CudaGraphModule | str


def parse_cuda_graph_module(text: str) -> CudaGraphModuleArg:
    """Parse one ``--cuda-graph-modules`` word: a module name, or a retired spelling as is."""
    if text in DEPRECATED_MODULE_SPELLINGS:
        return text
    name = text.split(".", 1)[1] if text.startswith("CudaGraphModule.") else text
    try:
        return CudaGraphModule[name]
    except KeyError:
        names = ", ".join(member.name for member in CudaGraphModule)
        raise ValueError(f"choose from {names} "
                         "(or leave the list empty for the whole layer)") from None


parse_cuda_graph_module.__name__ = "cuda_graph_module"

#: Signal numbers Megatron offers for ``--exit-signal`` (Linux numbering).
EXIT_SIGNAL_CHOICES: tuple[int, ...] = (*range(1, 32), 34, 64)


def parse_exit_signal(text: str) -> int:
    """Parse a signal name (``SIGTERM``) into a ``signal.Signals`` member, as Megatron's
    type is (an ``int`` subclass; a plain number where this platform lacks the name).

    Megatron looks the text up as a ``signal.Signals`` member name, so numbers and short
    or lower-case spellings are refused, as there.
    """
    name = text.strip()
    member = getattr(signal.Signals, name, None) if name.startswith("SIG") else None
    if member is None:
        member = _LINUX_SIGNALS.get(name)
    if member is None:
        raise ValueError("give a signal name such as SIGTERM or SIGUSR1")
    try:
        return signal.Signals(member)
    except ValueError:  # a Linux number this platform does not define
        return int(member)


parse_exit_signal.__name__ = "signal"

# Names that may be missing from ``signal.Signals`` on a non-Linux login node.
_LINUX_SIGNALS = {"SIGHUP": 1, "SIGINT": 2, "SIGQUIT": 3, "SIGKILL": 9, "SIGUSR1": 10,
                  "SIGUSR2": 12, "SIGTERM": 15, "SIGRTMIN": 34, "SIGRTMAX": 64}
