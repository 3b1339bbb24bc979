#!/usr/bin/env bash
# Install everything from this checkout, then run the whole test suite: the main tier
# (Python 3.11 here, torch's CPU build) and the Megatron tier (Python 3.12 with Megatron-LM's
# released code as the reference; its environment is cached under ~/.cache/megaplug).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
status=0
# -n auto: one pytest-xdist worker per core; --dist loadfile: a file's tests in one worker, in order
# (the blocks of a documentation page build on each other; a later -n in "$@" wins)
python -m pytest -n auto --dist loadfile "$@" || status=$?
bash scripts/megatron-tier.sh || status=$?
exit "$status"
