#!/usr/bin/env bash
# The Megatron tier: megaplug checked against Megatron-LM's own released code.
#
# Megatron needs Python 3.12 and torch (the registry's CUDA build on 3.12, ~3 GB), so the
# heavy part lives in a cached environment outside the checkout (scripts/megatron-env.sh).
# This checkout's megaplug and plugin distributions are installed editable into a small
# per-checkout environment, .venv-megatron, over the cached one (scripts/megatron-overlay.sh).
# Arguments are passed to pytest (default: every test module under a `megatron/` folder).
set -euo pipefail
cd "$(dirname "$0")/.."
# sybil: the root conftest.py collects the documentation's blocks (docs/snippets.md), and
# tests/megatron/test_docs_snippets.py runs those marked for this tier.
PYTHON="$(bash scripts/megatron-overlay.sh .venv-megatron "sybil>=9" "pytest-xdist>=3.5")"
if [ "$#" -eq 0 ]; then
    mapfile -t paths < <(find tests plugins -type d -name megatron -path '*tests/megatron' | sort)
    set -- "${paths[@]}"
fi
# one pytest-xdist worker per core, a file's tests in one worker, as the main tier
exec "$PYTHON" -m pytest -p no:cacheprovider -n auto --dist loadfile "$@"
