#!/usr/bin/env bash
# On a GPU machine: Megatron-LM's own pretrain_gpt.py, unmodified, trained twice with the
# same seed -- once with Megatron's arguments module, once through megaplug's switch
# (python -m megaplug.megatron) -- the per-iteration losses side by side, then each run's
# checkpoint resumed by the other (--use-checkpoint-args). Prints a PASS/FAIL summary and
# exits 1 when anything failed.
#
#   MEGATRON_LM=/path/to/Megatron-LM [PYTHON=python3] [ITERS=50] [OUT=DIR] [CKPT_DIR=DIR] \
#       [RUN_TIMEOUT=SECONDS] [NPROC=1] [LAYOUT="--tensor-model-parallel-size 2"] \
#       [RESUME_CHECK=1] [ROPE_CHECK=0] [CKPT_FORMAT=torch] bash scripts/gpu-check.sh
#
# CKPT_FORMAT=torch_dist saves and resumes distributed checkpoints (the path on which
# megatron-core 0.19 reads --stream-ckpt-dequant while loading).
# NPROC ranks per run (torchrun --nproc-per-node), LAYOUT extra flags (the parallel layout);
# RESUME_CHECK=0 leaves out the cross-resumes (scripts/gpu-multi.sh runs one layout each).
# The switch runs with pre-flight on, its default; both runs' argument tables (Megatron's
# printout) must be identical but for the checkpoint folder. ROPE_CHECK=1 also launches
# the model with RoPE and its fusion on (the default) on a node without Transformer Engine:
# the switch must refuse it before any model is built; Megatron's own arguments are timed
# to the same failure, when it builds the model. Table check: every line of Megatron's table
# is in the switch's, byte for byte; the switch's may add settings this Megatron revision does
# not declare (megaplug follows a newer one), named in the output.
# DRY_RUN=1 needs neither a GPU nor Megatron-LM: it prints the torchrun command lines and
# resolves the configuration with megaplug at world size NPROC, as each rank would.
#
# Logs and loss tables go to $OUT/gpu-check (default /tmp/gpu-check); checkpoints to
# $CKPT_DIR, or to a temporary folder removed at the end. RUN_TIMEOUT bounds each training.
#
# Needs: a CUDA GPU, torch, megaplug and its plugins importable by $PYTHON, a Megatron-LM
# checkout (its megatron/ package is used, as `python pretrain_gpt.py` would), make and a C++
# compiler for Megatron's dataset helpers. Transformer Engine and Apex are not needed
# (--transformer-impl local; no fused softmax, persistent layer norm or gradient-accumulation
# kernels).
set -uo pipefail
if [ -z "${DRY_RUN:-}" ]; then
    MLM="$(cd "${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}" && pwd)" || exit 2
fi
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
ITERS="${ITERS:-50}"
RESUME=$((ITERS + 10))
NPROC="${NPROC:-1}"
read -r -a LAYOUT_ARGS <<< "${LAYOUT:-}"
WORK="${OUT:-/tmp}/gpu-check"
rm -rf "$WORK"; mkdir -p "$WORK"
if [ -n "${CKPT_DIR:-}" ]; then CKPT="$CKPT_DIR"; mkdir -p "$CKPT"
else CKPT="$(mktemp -d /tmp/gpu-check-ckpt.XXXXXX)"; trap 'rm -rf "$CKPT"' EXIT; fi
# Never NVLink multicast on a shared host.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export CUDA_DEVICE_MAX_CONNECTIONS=1 PYTHONUNBUFFERED=1
RESULTS=()
record() { RESULTS+=("$1 $2"); echo "== $1: $2"; }

# The same model, schedule and data for every run. The learning-rate schedule spans the
# resumed runs too (--lr-decay-iters); the resumes take the scheduler from the checkpoint
# (--use-checkpoint-opt_param-scheduler): otherwise Megatron refuses it, its weight-decay
# span (train_iters x global batch) differing.
# No Apex: no fused masked softmax (its kernel ships with Apex), no gradient-accumulation fusion,
# no persistent layer norm (torch's LayerNorm stands in for Apex's and refuses it).
MODEL=(--num-layers 4 --hidden-size 512 --num-attention-heads 8 --seq-length 512
       --max-position-embeddings 512 --micro-batch-size 4 --global-batch-size 32
       --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 5
       --lr-decay-iters "$RESUME" --weight-decay 0.1
       --clip-grad 1.0 --mock-data --tokenizer-type NullTokenizer --vocab-size 32000 --bf16
       --transformer-impl local --no-gradient-accumulation-fusion --no-masked-softmax-fusion
       --no-persist-layer-norm
       --log-interval 1 --log-throughput
       --eval-iters 0 --eval-interval 100000 --seed 1234 --ckpt-format "${CKPT_FORMAT:-torch}"
       --save-interval "$ITERS" "${LAYOUT_ARGS[@]}")

train() {  # train NAME SWITCH(megatron|megaplug) EXTRA_ARGS...
    local name="$1" switch="$2"; shift 2
    local launcher=("$PY" -m torch.distributed.run --standalone --nproc-per-node "$NPROC")
    if [ "$switch" = megaplug ]; then launcher+=(-m megaplug.megatron); fi
    if [ -n "${RUN_TIMEOUT:-}" ]; then launcher=(timeout "$RUN_TIMEOUT" "${launcher[@]}"); fi
    local started=$SECONDS
    (cd "$MLM" && "${launcher[@]}" pretrain_gpt.py "${MODEL[@]}" "$@") > "$WORK/$name.log" 2>&1
    local status=$?
    echo "$name: exit $status in $((SECONDS - started)) s ($WORK/$name.log)"
    if [ $status -eq 0 ]; then tail -n 3 "$WORK/$name.log"
    else grep -v -i -e warn -e '^ *$' "$WORK/$name.log" | tail -n 25; fi
    return $status
}

losses() {  # each logged iteration: "ITER LM_LOSS GRAD_NORM MS_PER_ITER"
    sed -n 's/.*iteration *\([0-9]*\)\/.*elapsed time per iteration (ms): \([0-9.]*\).*lm loss: \([0-9.E+-]*\).*grad norm: \([0-9.naif]*\).*/\1 \3 \4 \2/p' "$1"
}

compare() {  # compare NAME_A LOG_A NAME_B LOG_B MIN_ITERATIONS: the losses side by side
    losses "$2" > "$WORK/loss-$1.txt"
    losses "$4" > "$WORK/loss-$3.txt"
    "$PY" - "$1" "$WORK/loss-$1.txt" "$3" "$WORK/loss-$3.txt" "$5" <<'PYEOF'
import statistics, sys
na, pa, nb, pb, least = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
def read(path):
    return {int(f[0]): f[1:] for f in (line.split() for line in open(path)) if len(f) == 4}
a, b = read(pa), read(pb)
print(f"{'iter':>5} {na + ' loss':>16} {nb + ' loss':>16} {'grad norm':>10} {'grad norm':>10}")
for it in sorted(set(a) | set(b)):
    la, ga = (a[it][0], a[it][1]) if it in a else ("-", "-")
    lb, gb = (b[it][0], b[it][1]) if it in b else ("-", "-")
    print(f"{it:>5} {la:>16} {lb:>16} {ga:>10} {gb:>10}")
both = [it for it in a if it in b]
same = [it for it in both if a[it][:2] == b[it][:2]]
close = [it for it in both
         if abs(float(a[it][0]) - float(b[it][0])) <= 1e-3 * abs(float(a[it][0]))]
print(f"iterations logged: {na} {len(a)}, {nb} {len(b)}; identical as printed (loss and grad "
      f"norm) {len(same)}, loss within 0.1% {len(close)}")
for name, runs in ((na, a), (nb, b)):
    times = [float(v[2]) for it, v in sorted(runs.items())[1:]]  # the first holds start-up
    if times:
        ms = statistics.median(times)
        print(f"{name}: median {ms:.1f} ms/iteration after the first, "
              f"{32 * 512 / ms * 1000:.0f} tokens/s (global batch 32 x 512 tokens)")
ok = len(a) >= least and len(b) >= least and len(close) == len(a) == len(b)
print(f"== {na}-vs-{nb}:", "PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
PYEOF
}

resumed() {  # resumed LOG: it continued from iteration ITERS (not from scratch) to RESUME
    local first last
    first=$(losses "$1" | head -n 1 | cut -d' ' -f1)
    last=$(losses "$1" | tail -n 1 | cut -d' ' -f1)
    echo "$(basename "$1" .log): logged iterations ${first:-none}..${last:-none}" \
         "(expected $((ITERS + 1))..$RESUME)"
    [ "$first" = "$((ITERS + 1))" ] && [ "$last" = "$RESUME" ]
}

if [ -n "${DRY_RUN:-}" ]; then
    for switch in megatron megaplug; do
        printf '%s run:' "$switch"
        printf ' %q' torchrun --standalone --nproc-per-node "$NPROC" \
            $([ "$switch" = megaplug ] && echo -m megaplug.megatron) pretrain_gpt.py \
            "${MODEL[@]}" --train-iters "$ITERS"
        echo
    done
    CUDA_DEVICE_MAX_CONNECTIONS=1 WORLD_SIZE="$NPROC" "$PY" -m megaplug resolve \
        --assume-device-capability 9.0 -- "${MODEL[@]}" --train-iters "$ITERS" \
        > "$WORK/resolved.json" && record "resolve-at-world-size-$NPROC" PASS \
        || record "resolve-at-world-size-$NPROC" FAIL
    "$PY" - "$WORK/resolved.json" <<'PYEOF'
import json, sys
try:
    values = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)
keys = ("world_size", "tensor_model_parallel_size", "pipeline_model_parallel_size",
        "virtual_pipeline_model_parallel_size", "data_parallel_size", "micro_batch_size",
        "global_batch_size")
print("resolved:", ", ".join(f"{key}={values.get(key)}" for key in keys))
PYEOF
    echo; echo "== summary"; printf '%s\n' "${RESULTS[@]}"
    case " ${RESULTS[*]} " in *" FAIL "*) exit 1 ;; esac
    exit 0
fi

nvidia-smi -L || true
"$PY" -c 'import torch, megaplug; print("torch", torch.__version__, "cuda", torch.version.cuda,
"gpu", torch.cuda.get_device_name(0), "capability", torch.cuda.get_device_capability(0))'

# Megatron compiles its dataset helpers with `make` at start-up, naming the library after
# python3-config. Build them here once (python3-config need not be installed) so that its
# make finds them up to date; without python3-config on PATH, one that answers is put there.
DATASETS="$MLM/megatron/core/datasets"
EXT="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
if ! (cd "$MLM" && "$PY" -c 'import megatron.core.datasets.helpers_cpp') 2>/dev/null; then
    make -C "$DATASETS" LIBEXT="$EXT" || echo "gpu-check: could not build $DATASETS/helpers_cpp$EXT"
fi
[ -f "$DATASETS/helpers_cpp$EXT" ] && touch "$DATASETS/helpers_cpp$EXT"
if ! command -v python3-config > /dev/null; then
    SHIM="$(mktemp -d /tmp/gpu-check-bin.XXXXXX)"
    printf '#!/bin/sh\necho %s\n' "$EXT" > "$SHIM/python3-config"; chmod +x "$SHIM/python3-config"
    export PATH="$SHIM:$PATH"
fi

train megatron megatron --train-iters "$ITERS" --save "$CKPT/megatron" \
    && record "megatron-own-arguments-train" PASS || record "megatron-own-arguments-train" FAIL
train megaplug megaplug --train-iters "$ITERS" --save "$CKPT/megaplug" \
    && record "megaplug-switch-train" PASS || record "megaplug-switch-train" FAIL
compare megatron "$WORK/megatron.log" megaplug "$WORK/megaplug.log" "$ITERS" \
    | tee "$WORK/side-by-side.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] && record "losses-side-by-side" PASS \
    || record "losses-side-by-side" FAIL

table() {  # table LOG: Megatron's argument table in a run's log, less the checkpoint folder
    sed -n '/^-* arguments -*$/,/^-* end of arguments -*$/p' "$1" | grep -v '^  save \.'
}
table "$WORK/megatron.log" > "$WORK/table-megatron.txt"
table "$WORK/megaplug.log" > "$WORK/table-megaplug.txt"
echo "argument table: $(grep -c '^  ' "$WORK/table-megatron.txt") lines (Megatron's" \
     "arguments), $(grep -c '^  ' "$WORK/table-megaplug.txt") (the switch)"
diff "$WORK/table-megatron.txt" "$WORK/table-megaplug.txt" > "$WORK/table-diff.txt"
echo "settings only the switch's table has:" \
     $(sed -n 's/^>   \([a-z0-9_]*\) .*/\1/p' "$WORK/table-diff.txt")
if [ -s "$WORK/table-megaplug.txt" ] && ! grep -q '^<' "$WORK/table-diff.txt"
then record "argument-table-megatrons-lines-identical" PASS
else grep '^<' "$WORK/table-diff.txt"; record "argument-table-megatrons-lines-identical" FAIL; fi
if grep -q "pre-flight checks are off" "$WORK/megaplug.log"; then
    record "switch-ran-with-preflight-on" FAIL; else record "switch-ran-with-preflight-on" PASS
fi

if [ "${ROPE_CHECK:-0}" != 0 ]; then
    # RoPE with its fusion on, no Transformer Engine on this node: Megatron fails building
    # the model ("apply_rope_fusion is not available"); the switch refuses it first.
    ROPE_REFUSED="RoPE fusion (on by default) requires transformer_engine >= 1.4, not installed"
    started=$SECONDS
    train rope-megaplug megaplug --train-iters "$ITERS" --position-embedding-type rope
    status=$?
    echo "rope-megaplug: refused in $((SECONDS - started)) s"
    if [ $status -ne 0 ] && grep -qF "$ROPE_REFUSED" "$WORK/rope-megaplug.log" \
            && ! grep -q -i "building GPT model" "$WORK/rope-megaplug.log"; then
        record "rope-fusion-refused-by-the-switch-before-the-model" PASS
    else record "rope-fusion-refused-by-the-switch-before-the-model" FAIL; fi
    started=$SECONDS
    train rope-megatron megatron --train-iters "$ITERS" --position-embedding-type rope
    status=$?
    echo "rope-megatron: failed in $((SECONDS - started)) s"
    grep -m 1 -o "apply_rope_fusion is not available[^\"']*" "$WORK/rope-megatron.log"
    if [ $status -ne 0 ] && grep -q "apply_rope_fusion is not available" "$WORK/rope-megatron.log"
    then record "rope-fusion-fails-megatron-at-the-model" PASS
    else record "rope-fusion-fails-megatron-at-the-model" FAIL; fi
fi

if [ "${RESUME_CHECK:-1}" != 0 ]; then
    train resume-megaplug-from-megatron megaplug --train-iters "$RESUME" --use-checkpoint-args \
        --use-checkpoint-opt_param-scheduler \
        --load "$CKPT/megatron" --save "$CKPT/x1" --save-interval 100000 \
        && resumed "$WORK/resume-megaplug-from-megatron.log" \
        && record "megaplug-resumes-megatron-checkpoint" PASS \
        || record "megaplug-resumes-megatron-checkpoint" FAIL
    train resume-megatron-from-megaplug megatron --train-iters "$RESUME" --use-checkpoint-args \
        --use-checkpoint-opt_param-scheduler \
        --load "$CKPT/megaplug" --save "$CKPT/x2" --save-interval 100000 \
        && resumed "$WORK/resume-megatron-from-megaplug.log" \
        && record "megatron-resumes-megaplug-checkpoint" PASS \
        || record "megatron-resumes-megaplug-checkpoint" FAIL
    # Both resumes start from the same state (when the first runs matched) on the same data.
    compare resume-megaplug "$WORK/resume-megaplug-from-megatron.log" \
        resume-megatron "$WORK/resume-megatron-from-megaplug.log" 10 \
        | tee "$WORK/resumed-side-by-side.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] && record "resumed-losses-side-by-side" PASS \
        || record "resumed-losses-side-by-side" FAIL
fi

echo; echo "== summary"
printf '%s\n' "${RESULTS[@]}"
case " ${RESULTS[*]} " in *" FAIL "*) exit 1 ;; esac
exit 0
