"""List the raises of each Megatron release's forward, dispatch and optimizer-step code, and
say which pre-flight catches: the catch rate of ``first_step.py`` (docs in its docstring).

    python plugins/megaplug-preflight/scripts/first_step_raises.py [MIRROR]

MIRROR is a bare git mirror of Megatron-LM (default: /work/.mirror/NVIDIA+Megatron-LM/repo);
each ``core_v0.1X.0`` tag is read with ``git show``, nothing is imported. Each ``raise`` (and
each use of a name only a failed optional import leaves undefined) of the modules below is
printed with its release, file and line; ``DECIDED`` is the hand-made verdict on the ones
the configuration and environment alone decide, each with the pre-flight rule that refuses
it. The rest depend on data (token counts, NaNs, shapes at run time) or on programming
errors, or are model-build checks another family already covers.
"""

from __future__ import annotations

import re
import subprocess
import sys

RELEASES = [f"core_v0.{minor}.0" for minor in range(13, 20)]
MODULES = [
    "megatron/core/transformer/moe/moe_layer.py",
    "megatron/core/transformer/moe/router.py",
    "megatron/core/transformer/moe/moe_utils.py",
    "megatron/core/transformer/moe/token_dispatcher.py",
    "megatron/core/transformer/moe/experts.py",
    "megatron/core/optimizer/optimizer.py",
    "megatron/core/optimizer/distrib_optimizer.py",
]

#: (file, text the raise or use contains) -> the pre-flight rule that refuses it, and the
#: releases where it raises (0.17 defines te_general_gemm as None when the import fails).
DECIDED = {
    ("moe_layer.py", "performance may degrade if MoE and tensor parallelism"):
        ("first_step.moe_with_tensor_parallelism_needs_sequence_parallelism", RELEASES),
    ("moe_utils.py", "te_general_gemm is not None"):
        ("first_step.moe_router_needs_transformer_engine_before_0_17", RELEASES[:4]),
}


def raises(mirror: str, tag: str, path: str) -> list[tuple[int, str]]:
    """(line, text) of each raise, and each ``te_general_gemm`` use, in ``path`` at ``tag``."""
    try:
        text = subprocess.run(["git", "--git-dir", mirror, "show", f"{tag}:{path}"],
                              capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError:
        return []
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines, start=1):
        if re.match(r"\s*raise\b", line) or "te_general_gemm is not None" in line:
            context = " ".join(part.strip() for part in lines[number - 1:number + 2])
            found.append((number, context[:160]))
    return found


def main() -> None:
    mirror = sys.argv[1] if len(sys.argv) > 1 else "/work/.mirror/NVIDIA+Megatron-LM/repo"
    totals = {}
    for tag in RELEASES:
        caught = 0
        seen = 0
        for path in MODULES:
            name = path.rpartition("/")[2]
            for number, context in raises(mirror, tag, path):
                seen += 1
                rule = next((rule for (file, words), (rule, where) in DECIDED.items()
                             if file == name and words in context and tag in where), None)
                caught += rule is not None
                print(f"{tag} {name}:{number} {'CAUGHT ' + rule if rule else '-'} {context}")
        totals[tag] = (caught, seen)
    print()
    for tag, (caught, seen) in totals.items():
        print(f"{tag}: {seen} raises in the first step's modules, {caught} decided by the "
              f"configuration and refused at resolve")


if __name__ == "__main__":
    main()
