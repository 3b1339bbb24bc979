#!/usr/bin/env bash
# Create .venv (if needed) and install megaplug, every plugin distribution under plugins/,
# the example plugin, torch (CPU wheel) and the test tools -- all from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install --quiet --upgrade pip
# torch first and pinned: any other spec pulls a multi-GB CUDA build. numpy beside it: the
# CPU wheel does not pull it in, and without it every torch import warns "Failed to
# initialize NumPy".
python -m pip install --quiet "torch==2.13.0" numpy
editables=(-e ".[test]")
for dist in plugins/*/ examples/megaplug-example-plugin/; do
    [ -f "$dist/pyproject.toml" ] && editables+=(-e "$dist")
done
python -m pip install --quiet "${editables[@]}"
