"""Megatron-LM's two rounds of argument checks, run in-process as pre-flight's reference.

A launch is judged the way Megatron judges it: ``parse_args`` + ``validate_args`` (the first
round, which megaplug reproduces), then ``core_transformer_config_from_args`` (the second:
``TransformerConfig.__post_init__`` and friends, which pre-flight ports). This machine has
neither Transformer Engine nor a GPU, so Megatron's probes for them are patched to the
launch's ``assume`` -- including the fused kernels Megatron looks up by import, which exist
exactly when Transformer Engine is installed.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Iterator

#: Fused kernels Megatron's config checks look up as module attributes (None without TE),
#: by module, with the Transformer Engine version that provides them.
_FUSED_KERNELS = {
    "megatron.core.models.common.embeddings.rope_utils": (
        "1.4", ("fused_apply_rotary_pos_emb", "fused_apply_rotary_pos_emb_thd")),
    "megatron.core.transformer.moe.moe_utils": (
        "2.1", ("fused_permute", "fused_permute_with_probs", "fused_sort_chunks_by_index",
                "fused_sort_chunks_by_index_with_probs", "fused_unpermute")),
}


#: Filled by the tests, printed at the end of the session: per kind of launch,
#: [how many passed, out of how many].
TALLY: dict[str, list[int]] = {}


@dataclass(frozen=True)
class Verdict:
    """Where Megatron stopped a launch: ``parse``, ``validate``, ``model-config`` or ``ok``."""

    stage: str
    message: str = ""


def _available_kernel(*args: Any, **kwargs: Any) -> None:
    """Stands for a fused kernel that Transformer Engine provides; never called here."""


@contextlib.contextmanager
def targeting(launch: dict[str, Any], argv0: str = "pretrain_gpt.py") -> Iterator[None]:
    """Make this process look like the launch: argv, environment, TE, fused kernels, GPU."""
    import importlib

    import torch
    from packaging.version import Version

    import megatron.core.utils as core_utils
    import megatron.training.arguments as arguments

    assume = launch.get("assume") or {}
    te_version = (assume.get("packages") or {}).get("transformer_engine")
    capability = tuple(assume.get("device_capability") or (9, 0))
    saved_environ, saved_argv = dict(os.environ), sys.argv
    saved = [(core_utils, "_te_version"), (torch.cuda, "get_device_capability"),
             (arguments, "get_device_arch_version")]
    patches: list[tuple[Any, str, Any]] = [
        (core_utils, "_te_version", Version(te_version) if te_version else Version("0.0.0")),
        (torch.cuda, "get_device_capability", lambda *args, **kwargs: capability),
        (arguments, "get_device_arch_version", lambda: capability[0]),
    ]
    for module_name, (minimum, names) in _FUSED_KERNELS.items():
        module = importlib.import_module(module_name)
        present = te_version is not None and Version(te_version) >= Version(minimum)
        for name in names:
            saved.append((module, name))
            patches.append((module, name, _available_kernel if present else None))
    originals = [(owner, name, getattr(owner, name)) for owner, name in saved]
    os.environ.clear()
    os.environ.update({k: v for k, v in saved_environ.items() if k in ("PATH", "HOME", "TMPDIR")})
    os.environ.update(launch.get("env") or {})
    sys.argv = [argv0, *launch["argv"]]
    for owner, name, value in patches:
        setattr(owner, name, value)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_environ)
        sys.argv = saved_argv
        for owner, name, value in originals:
            setattr(owner, name, value)


_DOCSTRINGS_CACHED = False


def _cache_help_texts() -> None:
    """Megatron reads every config dataclass's source to build help texts each time it makes
    its parser (0.6 s a launch); they never change within a process, so read them once."""
    global _DOCSTRINGS_CACHED
    if _DOCSTRINGS_CACHED:
        return
    from megatron.training.argument_utils import ArgumentGroupFactory

    read = ArgumentGroupFactory._get_field_docstrings
    cache: dict[type, dict[str, str]] = {}

    def cached(self: Any, src_cfg_class: type) -> dict[str, str]:
        if src_cfg_class not in cache:
            cache[src_cfg_class] = read(self, src_cfg_class)
        return dict(cache[src_cfg_class])

    ArgumentGroupFactory._get_field_docstrings = cached
    _DOCSTRINGS_CACHED = True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text.splitlines()[0]}"


def megatron_verdict(launch: dict[str, Any]) -> Verdict:
    """Run Megatron's parse, validate and model-configuration rounds on the launch."""
    import megatron.training.arguments as arguments
    from megatron.training.argument_utils import core_transformer_config_from_args

    _cache_help_texts()
    quiet = io.StringIO()
    with targeting(launch), contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            args = arguments.parse_args()
        except SystemExit:
            return Verdict("parse", quiet.getvalue().strip().splitlines()[-1:][0]
                           if quiet.getvalue().strip() else "argparse exit")
        except Exception as exc:  # noqa: BLE001 - parse_args also checks a few environments
            return Verdict("parse", _first_line(exc))
        try:
            arguments.validate_args(args, dict(launch.get("args_defaults") or {}))
        except SystemExit:  # a few flags make validate_args print and exit()
            return Verdict("validate", "exit() in validate_args")
        except Exception as exc:  # noqa: BLE001 - Megatron raises every kind; all are a verdict
            return Verdict("validate", _first_line(exc))
        try:
            core_transformer_config_from_args(args)
        except Exception as exc:  # noqa: BLE001
            return Verdict("model-config", _first_line(exc))
    return Verdict("ok")


def megaplug_problems(launch: dict[str, Any]) -> list[Any] | None:
    """megaplug's problems for the launch (plugins as installed), or None when it resolves."""
    import megaplug

    assume = launch.get("assume") or {}
    capability = assume.get("device_capability")
    target = megaplug.TargetEnvironment(
        packages=dict(assume.get("packages") or {}),
        device_capability=tuple(capability) if capability else None,
        environ=dict(launch.get("env") or {}))
    try:
        megaplug.resolve(list(launch["argv"]), environ=dict(launch.get("env") or {}),
                         defaults=dict(launch.get("args_defaults") or {}), target=target)
    except megaplug.ConfigError as exc:
        return list(exc.problems)
    return None
