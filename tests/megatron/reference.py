"""Megatron-LM's own argument handling, run in-process as the reference for a parity case.

A case names its command line, environment, the entry script's ``args_defaults`` and the
cluster it targets (``assume``: Transformer Engine's version and the GPU's capability). This
machine has neither, so the reference is run with Megatron's probes for them patched to the
case's answers -- the same way the shared parity cases were produced.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator

PARITY_DIR = Path(os.environ.get("MEGAPLUG_PARITY_DIR",
                                 Path(__file__).resolve().parents[3] / "shared" / "parity"))


def case_files(kind: str = "cases") -> list[Path]:
    return sorted((PARITY_DIR / kind).glob("*.json"))


def load_case(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@contextlib.contextmanager
def targeting(case: dict[str, Any], argv0: str = "pretrain_gpt.py") -> Iterator[None]:
    """Make this process look like the case's launch: argv, environment, TE and GPU probes."""
    import torch
    from packaging.version import Version

    import megatron.core.utils as core_utils
    import megatron.training.arguments as arguments

    assume = case.get("assume") or {}
    te_version = (assume.get("packages") or {}).get("transformer_engine")
    capability = tuple(assume.get("device_capability") or (9, 0))
    saved = (dict(os.environ), sys.argv, core_utils._te_version,
             torch.cuda.get_device_capability, arguments.get_device_arch_version)
    os.environ.clear()
    os.environ.update({k: v for k, v in saved[0].items() if k in ("PATH", "HOME", "TMPDIR")})
    os.environ.update(case.get("env") or {})
    sys.argv = [argv0, *case["argv"]]
    core_utils._te_version = Version(te_version) if te_version else None
    torch.cuda.get_device_capability = lambda *args, **kwargs: capability
    arguments.get_device_arch_version = lambda: capability[0]
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        (sys.argv, core_utils._te_version, torch.cuda.get_device_capability,
         arguments.get_device_arch_version) = saved[1:]


def megatron_args(case: dict[str, Any], extra_args_provider: Any = None):
    """Megatron's ``parse_args`` + ``validate_args`` for the case (its printout silenced)."""
    import megatron.training.arguments as arguments

    with targeting(case), contextlib.redirect_stdout(io.StringIO()):
        args = arguments.parse_args(extra_args_provider)
        arguments.validate_args(args, dict(case.get("args_defaults") or {}))
    return args


#: megaplug's own plugins; any other installed plugin (the LoRA example) is not Megatron's.
MEGAPLUG_PLUGINS = {"moe", "mla", "fsdp", "gtp", "inference", "rl", "distillation", "kitchen",
                    "preflight"}


def third_party_blocks() -> list[str]:
    """``-p no:NAME`` for each installed plugin that is not one of megaplug's own."""
    from megaplug.cache._entry_points import entry_points

    return [token for entry_point in entry_points() if entry_point.name not in MEGAPLUG_PLUGINS
            for token in ("-p", f"no:{entry_point.name}")]


def megaplug_args(case: dict[str, Any], extra_args_provider: Any = None, **kwargs: Any):
    """megaplug's facade on the same case, the case's target stated explicitly."""
    from megaplug import TargetEnvironment
    from megaplug.megatron import parse_and_validate_args

    kwargs.setdefault("register", False)
    assume = case.get("assume") or {}
    capability = assume.get("device_capability")
    target = TargetEnvironment(packages=dict(assume.get("packages") or {}),
                               device_capability=tuple(capability) if capability else None)
    return parse_and_validate_args(
        extra_args_provider, args_defaults=dict(case.get("args_defaults") or {}),
        argv=[*third_party_blocks(), *case["argv"]], environ=dict(case.get("env") or {}),
        target=target, **kwargs)
