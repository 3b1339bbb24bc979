"""Check `megaplug plan`'s rows with the Megatron release's own parse_args + validate_args.

    .venv/bin/megaplug plan ... --format json > plan.json
    PYTHON_OF_MEGATRON plugins/megaplug-memory/scripts/plan_against_megatron.py plan.json

Runs under a Python that imports the release (``megatron.training.arguments``), e.g. the
cached environment of scripts/megatron-env.sh; megaplug need not be installed there. Each
row's argv is parsed and validated by Megatron as rank 0 of the plan's job, its probes for
Transformer Engine and the GPU patched to the target's answers (as tests/megatron/reference.py
does). Prints one line a row and how many Megatron accepts; exit status 1 if any is refused.
"""

import contextlib
import io
import json
import os
import sys


def accepts(argv: list[str], world_size: int, te_version: str, capability: tuple) -> str:
    """'' when Megatron's validate_args accepts ``argv``, else what it raised."""
    import torch
    from packaging.version import Version

    import megatron.core.utils as core_utils
    import megatron.training.arguments as arguments

    saved = dict(os.environ), sys.argv
    os.environ.update({"WORLD_SIZE": str(world_size), "RANK": "0", "LOCAL_RANK": "0",
                       "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    sys.argv = ["pretrain_gpt.py", *argv]
    core_utils._te_version = Version(te_version)
    torch.cuda.get_device_capability = lambda *args, **kwargs: capability
    arguments.get_device_arch_version = lambda: capability[0]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = arguments.parse_args()
            arguments.validate_args(args, {})
        return ""
    except BaseException as error:  # AssertionError, SystemExit from argparse, the rest
        return f"{type(error).__name__}: {error}"[:200]
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        sys.argv = saved[1]


def main() -> None:
    answer = json.load(open(sys.argv[1]))
    te_version = os.environ.get("TE_VERSION", "2.17.1")
    world_size = int(os.environ["PLAN_GPUS"])
    refused = 0
    for row in answer["layouts"]:
        verdict = accepts(row["argv"], world_size, te_version, (9, 0))
        refused += bool(verdict)
        layout = row["layout"]
        print(f"{row['rank']:3d} TP{layout['tp']} PP{layout['pp']} VPP{layout['vpp']} "
              f"CP{layout['cp']} EP{layout['ep']} DP{layout['dp']} mbs{layout['mbs']} "
              f"{layout['recompute']}: {verdict or 'accepted'}")
    print(f"Megatron accepts {len(answer['layouts']) - refused} of {len(answer['layouts'])}")
    sys.exit(1 if refused else 0)


if __name__ == "__main__":
    main()
