#!/usr/bin/env bash
# On a GPU machine: Megatron-LM's own pretrain_gpt.py, unmodified, trained twice with the
# same seed -- once with Megatron's arguments module, once through megaplug's switch
# (python -m megaplug.megatron) -- the per-iteration losses side by side, then each run's
# checkpoint resumed by the other (--use-checkpoint-args). Prints a PASS/FAIL summary.
#
#   MEGATRON_LM=/path/to/Megatron-LM [PYTHON=python3] [ITERS=50] bash scripts/gpu-check.sh
#
# Needs: a CUDA GPU, torch, megaplug and its plugins importable by $PYTHON, a Megatron-LM
# checkout (its megatron/ package is used, as `python pretrain_gpt.py` would). Transformer
# Engine and Apex are not needed (--transformer-impl local).
set -uo pipefail
cd "$(dirname "$0")/.."
MLM="${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}"
PY="${PYTHON:-python3}"
ITERS="${ITERS:-50}"
WORK="${OUT:-/tmp}/gpu-check"
rm -rf "$WORK"; mkdir -p "$WORK"
# Never NVLink multicast on a shared host.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
RESULTS=()
record() { RESULTS+=("$1 $2"); echo "== $1: $2"; }

MODEL=(--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 512
       --max-position-embeddings 512 --micro-batch-size 4 --global-batch-size 32
       --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 5 --weight-decay 0.1
       --clip-grad 1.0 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 --bf16
       --transformer-impl local --no-gradient-accumulation-fusion --log-interval 1
       --eval-iters 0 --eval-interval 100000 --seed 1234 --ckpt-format torch
       --save-interval "$ITERS")

train() {  # train NAME SWITCH(megatron|megaplug) EXTRA_ARGS...
    local name="$1" switch="$2"; shift 2
    local launcher=("$PY" -m torch.distributed.run --standalone --nproc-per-node 1)
    if [ "$switch" = megaplug ]; then launcher+=(-m megaplug.megatron); fi
    local started=$SECONDS
    (cd "$MLM" && "${launcher[@]}" pretrain_gpt.py "${MODEL[@]}" "$@") > "$WORK/$name.log" 2>&1
    local status=$?
    echo "$name: exit $status in $((SECONDS - started)) s ($WORK/$name.log)"
    tail -n 3 "$WORK/$name.log"
    return $status
}

losses() {  # the "lm loss" of each logged iteration: "ITER LOSS" lines
    sed -n 's/.*iteration *\([0-9]*\)\/.*lm loss: \([0-9.E+-]*\).*/\1 \2/p' "$1"
}

nvidia-smi -L || true
"$PY" -c 'import torch, megaplug; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpu", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))'

train megatron megatron --train-iters "$ITERS" --save "$WORK/ckpt-megatron" \
    && record "megatron-own-arguments-train" PASS || record "megatron-own-arguments-train" FAIL
train megaplug megaplug --train-iters "$ITERS" --save "$WORK/ckpt-megaplug" \
    && record "megaplug-switch-train" PASS || record "megaplug-switch-train" FAIL

losses "$WORK/megatron.log" > "$WORK/loss-megatron.txt"
losses "$WORK/megaplug.log" > "$WORK/loss-megaplug.txt"
"$PY" - "$WORK/loss-megatron.txt" "$WORK/loss-megaplug.txt" "$ITERS" <<'PYEOF'
import sys
read = lambda p: dict(line.split() for line in open(p) if line.strip())
a, b, iters = read(sys.argv[1]), read(sys.argv[2]), int(sys.argv[3])
print(f"{'iter':>5} {'megatron':>14} {'megaplug':>14}")
for it in sorted(set(a) | set(b), key=int):
    print(f"{it:>5} {a.get(it, '-'):>14} {b.get(it, '-'):>14}")
same = [it for it in a if it in b and float(a[it]) == float(b[it])]
close = [it for it in a if it in b and abs(float(a[it]) - float(b[it])) <= 1e-3 * abs(float(a[it]))]
print(f"iterations logged: megatron {len(a)}, megaplug {len(b)}; bit-identical {len(same)}, "
      f"within 0.1% {len(close)}")
ok = len(a) >= iters and len(b) >= iters and len(close) == len(a)
print("== loss-side-by-side:", "PASS" if ok else "FAIL")
PYEOF
[ $? -eq 0 ] && RESULTS+=("loss-side-by-side see-above") || true

RESUME=$((ITERS + 10))
train resume-megaplug-from-megatron megaplug --train-iters "$RESUME" --use-checkpoint-args \
    --load "$WORK/ckpt-megatron" --save "$WORK/ckpt-x1" --save-interval 100000 \
    && grep -q "iteration *$RESUME/" "$WORK/resume-megaplug-from-megatron.log" \
    && record "megaplug-resumes-megatron-checkpoint" PASS \
    || record "megaplug-resumes-megatron-checkpoint" FAIL
train resume-megatron-from-megaplug megatron --train-iters "$RESUME" --use-checkpoint-args \
    --load "$WORK/ckpt-megaplug" --save "$WORK/ckpt-x2" --save-interval 100000 \
    && grep -q "iteration *$RESUME/" "$WORK/resume-megatron-from-megaplug.log" \
    && record "megatron-resumes-megaplug-checkpoint" PASS \
    || record "megatron-resumes-megaplug-checkpoint" FAIL
losses "$WORK/resume-megaplug-from-megatron.log" | tail -n 3
losses "$WORK/resume-megatron-from-megaplug.log" | tail -n 3

echo; echo "== summary"
printf '%s\n' "${RESULTS[@]}"
grep -h "loss-side-by-side:" "$WORK"/*.txt 2>/dev/null || true
