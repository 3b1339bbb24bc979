#!/usr/bin/env bash
# Install everything from this checkout, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
python -m pytest "$@"
