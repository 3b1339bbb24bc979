#!/usr/bin/env bash
# On the GPU machine: build Megatron's dataset helpers once, then measure one batch of the corpus.
#   MEGATRON_LM=PATH [BATCH=A] [BUDGET=480] bash plugins/megaplug-memory/scripts/measure_corpus.sh
# Results: $OUT/corpus-$BATCH.jsonl and $OUT/logs-$BATCH.txt (see measure_corpus.py).
set -uo pipefail
MLM="$(cd "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM source tree}" && pwd)"
HERE="$(cd "$(dirname "$0")" && pwd)"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
EXT="$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if ! command -v python3-config > /dev/null; then  # Megatron's Makefile names the library after it
    SHIM="$(mktemp -d)"; printf '#!/bin/sh\necho %s\n' "$EXT" > "$SHIM/python3-config"
    chmod +x "$SHIM/python3-config"; export PATH="$SHIM:$PATH"
fi
make -s -C "$MLM/megatron/core/datasets" LIBEXT="$EXT" > /dev/null || echo "could not build the dataset helpers"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 "$HERE/measure_corpus.py" --megatron "$MLM" --batch "${BATCH:-A}" --out "${OUT:-/tmp/memory-corpus}" \
    --budget "${BUDGET:-480}" ${ONLY:+--only "$ONLY"}
