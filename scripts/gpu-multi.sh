#!/usr/bin/env bash
# On a host with 2-4 GPUs: tensor, pipeline and data parallel Megatron training through
# megaplug (the multi-GPU issue).
#
#   MEGATRON_LM=/path/to/Megatron-LM [PYTHON=python3] [ITERS=30] [OUT=DIR] bash scripts/gpu-multi.sh
#   DRY_RUN=1 [PYTHON=python3] bash scripts/gpu-multi.sh     # anywhere: no GPU, no Megatron-LM
#
# For each layout -- TP 2; PP 2 with a virtual pipeline; TP 2 x DP 2 -- Megatron-LM's own
# pretrain_gpt.py trains ITERS iterations with Megatron's arguments module and through
# megaplug's switch, losses side by side (scripts/gpu-check.sh with NPROC and LAYOUT). A
# layout needing more GPUs than the host has, or every layout under DRY_RUN, is instead
# resolved by megaplug at its world size and its torchrun command lines printed.
# Then a configuration Megatron only refuses while building the model (9 attention heads
# over tensor parallelism 2) must be refused by every rank, with the same message, before
# any rank builds a model: through the switch, whose pre-flight checks are on by default;
# under DRY_RUN, by `megaplug resolve` as each rank (RANK 0..N-1) would run it. This step
# needs one GPU.
# examples/train_gpt.py over 2 GPUs (NCCL, the cross-rank check) is step e of
# scripts/gpu-check-example.sh. Exits 1 when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
ITERS="${ITERS:-30}"
WORK="${OUT:-/tmp}/gpu-multi"
rm -rf "$WORK"; mkdir -p "$WORK"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
GPUS=0
if [ -z "${DRY_RUN:-}" ]; then GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true); fi
RESULTS=()
record() { RESULTS+=("$1 $2"); echo "== $1: $2"; }

LAYOUTS=(  # NAME|WORLD_SIZE|FLAGS
    "tp2|2|--tensor-model-parallel-size 2"
    "pp2-vpp2|2|--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1"
    "tp2-dp2|4|--tensor-model-parallel-size 2"
)
for layout in "${LAYOUTS[@]}"; do
    IFS='|' read -r name size flags <<< "$layout"
    echo; echo "#### $name: $size ranks, $flags"
    if [ "$GPUS" -ge "$size" ]; then
        NPROC="$size" LAYOUT="$flags" ITERS="$ITERS" RESUME_CHECK=0 OUT="$WORK/$name" \
            bash scripts/gpu-check.sh && record "$name-trains-alike" PASS \
            || record "$name-trains-alike" FAIL
    else
        DRY_RUN=1 NPROC="$size" LAYOUT="$flags" ITERS="$ITERS" OUT="$WORK/$name" \
            PYTHON="$PY" bash scripts/gpu-check.sh && record "$name-dry-run" PASS \
            || record "$name-dry-run" FAIL
    fi
done

# Refused by every rank, alike, before a model exists.
REFUSED=(--num-layers 4 --hidden-size 576 --num-attention-heads 9 --tensor-model-parallel-size 2
         --seq-length 512 --max-position-embeddings 512 --micro-batch-size 4
         --global-batch-size 32 --lr 3e-4 --train-iters 10 --mock-data
         --tokenizer-type NullTokenizer --vocab-size 32000 --bf16 --transformer-impl local)
echo; echo "#### refused: 9 attention heads over tensor parallelism 2, 2 ranks"
# One GPU is enough: a refused configuration never reaches CUDA or NCCL (two ranks that did
# would fail on one GPU, and so fail this step).
if [ "$GPUS" -ge 1 ]; then
    (cd "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}" \
        && "$PY" -m torch.distributed.run --standalone --nproc-per-node 2 \
            --log-dir "$WORK/ranks" --redirects 3 \
            -m megaplug.megatron pretrain_gpt.py "${REFUSED[@]}") > "$WORK/refused.log" 2>&1
    status=$?
    for rank in 0 1; do  # each rank's own stdout and stderr, as torchrun kept them
        cat $(find "$WORK/ranks" -path "*/$rank/std*.log") 2>/dev/null \
            | grep -e "problem" -e "attention-heads" > "$WORK/refused-$rank.txt"
    done
    built=$(cat $(find "$WORK/ranks" -name "std*.log") "$WORK/refused.log" \
        | grep -c -i "building GPT model")
else
    status=0
    for rank in 0 1; do
        RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=2 "$PY" -m megaplug resolve \
            --assume-device-capability 9.0 -- "${REFUSED[@]}" > /dev/null 2> "$WORK/refused-$rank.txt" \
            && status=0 || status=$?
    done
    built=0
fi
cat "$WORK/refused-0.txt"
if [ "$status" -ne 0 ] && [ -s "$WORK/refused-0.txt" ] \
        && cmp -s "$WORK/refused-0.txt" "$WORK/refused-1.txt" && [ "$built" -eq 0 ]; then
    record "refused-alike-on-every-rank-before-the-model" PASS
else
    record "refused-alike-on-every-rank-before-the-model" FAIL
fi

echo; echo "== summary ($GPUS GPU(s)${DRY_RUN:+, dry run})"
printf '%s\n' "${RESULTS[@]}"
case " ${RESULTS[*]} " in *" FAIL "*) exit 1 ;; esac
exit 0
