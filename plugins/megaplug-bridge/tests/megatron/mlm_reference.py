"""Megatron-LM's own config container for a parity case, built as ``pretrain_gpt.py`` builds
it, beside megaplug's export of the same launch.

Megatron's side: ``parse_args`` + ``validate_args`` (the case's probes patched, as the
shared cases were made: ``reference.targeting``), the tokenizer built where it can be
(as ``parse_and_validate_args`` does), ``gpt_config_from_args`` when the vocabulary is
known (``hybrid_config_from_args`` for a hybrid layer pattern, as ``pretrain_hybrid.py``),
``pretrain_cfg_container_from_args``, and ``to_yaml``'s text.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import warnings
from typing import Any

import reference

#: Filled by the tests, printed at the end of the session: [passed, out of].
TALLY: dict[str, list[int]] = {}


def tally(kind: str, passed: bool) -> None:
    counts = TALLY.setdefault(kind, [0, 0])
    counts[0] += int(passed)
    counts[1] += 1


def megatron_yaml(case: dict[str, Any]) -> str:
    """The YAML Megatron's own code writes for the case; raises what Megatron raises."""
    import megatron.training.arguments as arguments
    from megatron.training import global_vars
    from megatron.training.argument_utils import gpt_config_from_args, hybrid_config_from_args
    from megatron.training.argument_utils import pretrain_cfg_container_from_args

    quiet = io.StringIO()
    with reference.targeting(case), contextlib.redirect_stdout(quiet), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args = arguments.parse_args()
        arguments.validate_args(args, dict(case.get("args_defaults") or {}))
        if args.vocab_size is None and getattr(args, "padded_vocab_size", None) is None:
            with contextlib.suppress(Exception):  # its files are not on this machine
                global_vars.build_tokenizer(args)
        known = args.vocab_size is not None or getattr(args, "padded_vocab_size", None)
        build = hybrid_config_from_args if args.hybrid_layer_pattern else gpt_config_from_args
        model = build(args) if known else None
        container = pretrain_cfg_container_from_args(args, model)
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "config.yaml")
            container.to_yaml(path)
            with open(path, encoding="utf-8") as handle:
                return handle.read()


def launch_of(case: dict[str, Any], argv: list[str] | None = None,
              packages: dict[str, str] | None = None) -> dict[str, Any]:
    """The launch ``megaplug export`` builds for the case (or for ``argv`` in its place):
    its flags, environment, defaults and assumed target (``packages`` added to the case's)."""
    from megaplug import TargetEnvironment

    assume = case.get("assume") or {}
    capability = assume.get("device_capability")
    target = TargetEnvironment(packages={**dict(assume.get("packages") or {}),
                                         **(packages or {})},
                               device_capability=tuple(capability) if capability else None)
    return {"argv": [*reference.third_party_blocks(), *(case["argv"] if argv is None
                                                        else argv)],
            "environ": dict(case.get("env") or {}),
            "args_defaults": dict(case.get("args_defaults") or {}), "target": target,
            "preflight": False}


def megaplug_export(case: dict[str, Any], argv: list[str] | None = None) -> Any:
    """megaplug's ``export --to mlm-config`` of the case (or of ``argv`` in its place)."""
    from megaplug_bridge.mlm_config import export

    quiet = io.StringIO()
    with reference.targeting(case), contextlib.redirect_stdout(quiet), \
            contextlib.redirect_stderr(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return export(launch_of(case, argv), "yaml")
