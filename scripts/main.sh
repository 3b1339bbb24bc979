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
python examples/train_gpt.py "$@"
