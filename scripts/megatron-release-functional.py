"""A Megatron release's own functional-test launch configurations, as cases for
``scripts/megatron-release-mutations.py`` (held-out real configurations of that release).

``python scripts/megatron-release-functional.py TAG OUT.json`` reads every
``tests/functional_tests/test_cases/**/model_config.yaml`` of the tag (Megatron-LM's git
directory: ``MEGATRON_GIT_DIR``) whose ``MODEL_ARGS`` are command-line flags, and writes them
as that runner's cases: flags with ``true`` as switches (``false`` left out), bracketed lists
split into values, ``${VAR}`` paths as ``/data/VAR``, the test's ``ENV_VARS`` with ``RANK``
0 and ``WORLD_SIZE`` from the test's name (``2N8G``: 16; else 8), the entry script's
``args_defaults`` (GPT: ``GPT2BPETokenizer``, BERT and T5: ``BertWordPieceLowerCase``).
Then ``bash scripts/megatron-release-mutations.sh TAG --cases OUT.json`` compares them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

GIT_DIR = os.environ.get("MEGATRON_GIT_DIR", "/work/.mirror/NVIDIA+Megatron-LM/repo")
DEFAULTS = {"bert": "BertWordPieceLowerCase", "t5": "BertWordPieceLowerCase"}


def _git(*args: str) -> str:
    return subprocess.run(["git", f"--git-dir={GIT_DIR}", *args], check=True,
                          capture_output=True, text=True).stdout


def _value(value: Any) -> list[str]:
    text = str(value)
    text = re.sub(r"\$\{?([A-Z_]+)\}?", lambda m: f"/data/{m.group(1)}", text)
    if text.startswith("[") and text.endswith("]"):
        return text[1:-1].replace(",", " ").split()
    return [text]


def argv_of(model_args: dict[str, Any]) -> list[str] | None:
    """The command line of a test's MODEL_ARGS, or None when they are not flags."""
    argv: list[str] = []
    for flag, value in model_args.items():
        if not str(flag).startswith("--"):
            return None
        if value is True or value == "true":
            argv.append(flag)
        elif value is False or value == "false" or value is None:
            continue
        else:
            argv += [flag, *_value(value)]
    return argv


def case_of(path: str, config: dict[str, Any]) -> dict[str, Any] | None:
    argv = argv_of(config.get("MODEL_ARGS") or {})
    if not argv:
        return None
    name = path.split("test_cases/", 1)[1].rsplit("/", 1)[0]
    nodes = re.search(r"(\d+)N(\d+)G", name)
    world = int(nodes.group(1)) * int(nodes.group(2)) if nodes else 8
    env = {k: str(v) for k, v in (config.get("ENV_VARS") or {}).items()}
    env.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE=str(world))
    family = name.split("/", 1)[0]
    tokenizer = DEFAULTS.get(family, "GPT2BPETokenizer")
    return {"argv": argv, "env": env, "args_defaults": {"tokenizer_type": tokenizer}}


def main() -> int:
    tag, out = sys.argv[1], Path(sys.argv[2])
    paths = [p for p in _git("ls-tree", "-r", "--name-only", tag,
                             "tests/functional_tests/test_cases").split()
             if p.endswith("model_config.yaml")]
    cases = {}
    for path in paths:
        try:
            config = yaml.safe_load(_git("show", f"{tag}:{path}"))
        except yaml.YAMLError:
            continue
        case = case_of(path, config or {})
        if case is not None:
            cases[path.split("test_cases/", 1)[1].rsplit("/", 1)[0]] = case
    base = {"argv": [], "env": {},
            "assume": {"device_capability": [9, 0],
                       "packages": {"transformer_engine": "2.17.1"}}}
    out.write_text(json.dumps({"base": base, "cases": cases}, indent=1))
    print(f"{len(cases)} configurations of {tag} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
