"""Print how two Megatron-LM revisions' argument validation differs (facts behind
docs/megatron-release-rules.md).

For each revision it takes ``validate_args`` and its helpers from
``megatron/training/arguments.py``, and ``core_transformer_config_from_args`` (from
``argument_utils.py`` where the revision has it), by their syntax trees, and prints a
unified, whitespace-insensitive diff of the two. Nothing is written: Megatron's code stays in
Megatron's history.

    python scripts/megatron-release-rule-diffs.py core_v0.18.2 core_v0.19.0
MEGATRON_GIT_DIR: Megatron-LM's git directory (default: the session's mirror).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import os
import subprocess
import sys

GIT_DIR = os.environ.get("MEGATRON_GIT_DIR", "/work/.mirror/NVIDIA+Megatron-LM/repo")
VALIDATION = ("parse_and_validate_args", "validate_args",
              "validate_model_config_args_from_heterogeneous_config",
              "_normalize_cuda_graph_modules_args", "_normalize_inference_cuda_graph_scope_arg")
SOURCES = (("megatron/training/arguments.py", VALIDATION + ("core_transformer_config_from_args",)),
           ("megatron/training/argument_utils.py", ("core_transformer_config_from_args",)))


def functions(revision: str) -> list[str]:
    """The revision's validation functions, as lines with their indentation stripped."""
    found: list[str] = []
    for path, names in SOURCES:
        shown = subprocess.run(["git", f"--git-dir={GIT_DIR}", "show", f"{revision}:{path}"],
                               capture_output=True, text=True)
        if shown.returncode:
            continue
        lines = shown.stdout.splitlines()
        for node in ast.parse(shown.stdout).body:
            if isinstance(node, ast.FunctionDef) and node.name in names:
                found += [line.strip() for line in lines[node.lineno - 1:node.end_lineno]
                          if line.strip()]
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", help="a Megatron-LM revision (tag or commit)")
    parser.add_argument("new", help="a later revision")
    options = parser.parse_args()
    sys.stdout.writelines(line + "\n" for line in difflib.unified_diff(
        functions(options.old), functions(options.new), options.old, options.new, n=2,
        lineterm=""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
