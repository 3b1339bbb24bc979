#!/usr/bin/env bash
# The main job: install, show the active plugins, resolve the embedded tiny-GPT config,
# then train on it for a few seconds on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
megaplug list
echo
echo "== where the data-parallel size and FFN size come from =="
megaplug explain data_parallel_size --config examples/configs/tiny-gpt.yaml
megaplug explain ffn_hidden_size --config examples/configs/tiny-gpt.yaml
echo
echo "== training (examples/train_gpt.py on examples/configs/tiny-gpt.yaml) =="
# Megatron's argument table (~900 lines, printed as validate_args ends) goes to a file: a
# few of its lines show here, the training's own output stays in view
mkdir -p runs
python examples/train_gpt.py "$@" | awk -v table=runs/train-arguments.txt '
    /^-+ arguments -+$/ { inside = 1; rows = 0; print > table; print; next }
    inside && /^-+ end of arguments -+$/ {
        inside = 0; print > table
        if (rows > 5) printf "... (%d more; the whole table: %s)\n", rows - 5, table
        print; next }
    inside { rows++; print > table; if (rows <= 5) print; next }
    { print }'
