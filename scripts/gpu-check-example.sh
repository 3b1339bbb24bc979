#!/usr/bin/env bash
# On a GPU machine: does examples/train_gpt.py train on the GPU, and does megaplug read the
# GPU it runs on? (issue 17: item 1, and the auto-detection half of item 2)
#
#   bash scripts/gpu-check-example.sh
#
# Needs this checkout and a python in which megaplug and torch import: $PYTHON, else
# python3. Each step ends with PASS, FAIL or SKIP, and a summary repeats them; the exit
# status is 1 when a step FAILed. Everything printed also goes to
# ${OUT:-/tmp}/gpu-check-example.log.
#
#   a  nvidia-smi -L
#   b  megaplug resolve with --tensor-model-parallel-size 2, whose CUDA_DEVICE_MAX_CONNECTIONS
#      check depends on the GPU generation: the compute capability megaplug reads from the
#      GPU, and the verdict without --assume against --assume-device-capability, each timed
#   c  examples/train_gpt.py --bf16 on a ~100M-parameter GPT: device, tokens/s, peak GPU
#      memory (torch.cuda.max_memory_allocated), GPU utilisation seen by nvidia-smi
#   d  a checkpoint written on the GPU resumes on the CPU, and one written on the CPU
#      resumes on the GPU
#   e  torchrun data parallelism over NCCL on 2 GPUs, and the cross-rank configuration
#      check over NCCL (SKIP with fewer than 2 GPUs)
#
# Settings (environment): GPU_CHECK_CAPABILITY, the capability to compare with (9.0);
# GPU_CHECK_TRAIN_ITERS, iterations of step c (30); GPU_CHECK_MODEL, the model and batch
# flags of steps c and e (8 layers, hidden 1024, 16 heads, seq 512, micro and global batch 8).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LOG_DIR=${OUT:-/tmp}
LOG=$LOG_DIR/gpu-check-example.log
CAPABILITY=${GPU_CHECK_CAPABILITY:-9.0}
ITERS=${GPU_CHECK_TRAIN_ITERS:-30}
MODEL=${GPU_CHECK_MODEL:-"--num-layers 8 --hidden-size 1024 --num-attention-heads 16 \
--seq-length 512 --max-position-embeddings 512 --micro-batch-size 8 --global-batch-size 8"}
read -r -a MODEL_FLAGS <<<"$MODEL"
CONFIG=examples/configs/tiny-gpt.yaml
SMALL_CONFIG=examples/configs/tiny-gpt-2iter.yaml
# a 100M model trains at a smaller learning rate than tiny-gpt's 3e-3
TRAIN_FLAGS=(--config "$CONFIG" "${MODEL_FLAGS[@]}" --lr 6e-4 --min-lr 6e-5
             --lr-warmup-iters 3 --log-interval 10 --eval-iters 0 --bf16)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-example.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
CHECK=$WORK/check.py
RESULTS=()

# The log parsing, in python: it reads what train_gpt.py and megaplug print.
cat >"$CHECK" <<'PY'
"""check.py train|resume|ddp|mismatch|verdict|smi FILE [ARG]: one summary line on stdout;
exit status 0 when the output shows what the step needs."""
import re
import sys


def number(text):
    return float(text.replace(",", ""))


def train(text, processes=1):
    device = re.search(r"^device: (.*)$", text, re.M)
    model = re.search(r"^model: .* ([\d,]+) parameters, (\w+)$", text, re.M)
    rates = re.findall(r"^iteration\s+(\d+)/\d+ \|.*\| tokens/s ([\d,]+)$", text, re.M)
    done = re.search(r"^done: (\d+) iterations in ([\d.]+) s \|.*\| tokens/s ([\d,]+)"
                     r"(?: \| max GPU memory allocated ([\d,]+) MiB)?", text, re.M)
    parts, ok = [], bool(device and model and rates and done)
    if device:
        parts.append(f"device {device.group(1)}")
        ok = ok and device.group(1).startswith("cuda")
        if processes > 1:
            ok = ok and f"{processes} processes over nccl" in device.group(1)
    if model:
        parts.append(f"{model.group(1)} parameters in {model.group(2)}")
    if rates:
        last_iteration, last_rate = rates[-1]
        parts.append(f"tokens/s {last_rate} at iteration {last_iteration}")
    if done:
        parts.append(f"{done.group(1)} iterations in {done.group(2)} s, "
                     f"tokens/s {done.group(3)} after the first")
        if done.group(4):
            parts.append(f"max GPU memory allocated {done.group(4)} MiB")
        else:
            ok = False
            parts.append("no GPU memory reported")
    else:
        parts.append("no 'done:' line")
    return ok, "; ".join(parts)


def resume(text, device, iteration=None):
    """A run on ``device`` that finished, having loaded ``iteration`` (if given)."""
    seen = re.search(r"^device: (\S+)", text, re.M)
    done = re.search(r"^done: .*\| final loss (\S+)", text, re.M)
    saved = re.search(r"^saved \S+", text, re.M)
    ok = bool(seen and seen.group(1).startswith(device) and done)
    line = f"on {seen.group(1) if seen else '?'}"
    if iteration is not None:
        loaded = re.search(rf"^loaded \S+ \(iteration {iteration}\)$", text, re.M)
        ok = ok and bool(loaded)
        line += f", loaded iteration {iteration}" if loaded else ", did not load"
    line += f", final loss {done.group(1)}" if done else ", no 'done:' line"
    return ok, line + (", saved" if saved else "")


def mismatch(text):
    found = re.search(r"error: ranks resolved different configurations; differing settings: "
                      r"(.*)$", text, re.M)
    ok = bool(found) and found.group(1).startswith("seed (rank 0: 1234, rank 1: 7)")
    return ok, (f"stopped naming {found.group(1)}" if found
                else "no 'differing settings' message")


def verdict(text):
    problems = [re.sub(r" \(hint: .*\)$", "", line[4:]) for line in text.splitlines()
                if line.startswith("  - ")]
    return True, " / ".join(problems) if problems else "valid"


def smi(text):
    rows = [line.split(",") for line in text.splitlines() if line.count(",") == 1]
    rows = [(number(u.strip().rstrip(" %")), number(m.strip().split()[0])) for u, m in rows
            if u.strip().rstrip(" %").replace(".", "").isdigit()]
    if not rows:
        return False, "no nvidia-smi samples"
    return (max(u for u, _ in rows) > 0,
            f"GPU utilisation up to {max(u for u, _ in rows):.0f}%, memory used up to "
            f"{max(m for _, m in rows):,.0f} MiB ({len(rows)} samples)")


def main(argv):
    kind, path, *rest = argv
    text = open(path, encoding="utf-8", errors="replace").read()
    if kind == "train":
        ok, line = train(text)
    elif kind == "ddp":
        ok, line = train(text, processes=2)
        agreed = re.search(r"^configuration ([0-9a-f]{12})\w* agreed by 2 rank\(s\)", text, re.M)
        ok = ok and bool(agreed)
        line = (f"config {agreed.group(1)} agreed by 2 ranks; " if agreed else
                "no agreement line; ") + line
    elif kind == "resume":
        ok, line = resume(text, rest[0], int(rest[1]) if len(rest) > 1 else None)
    elif kind == "mismatch":
        ok, line = mismatch(text)
    elif kind == "verdict":
        ok, line = verdict(text)
    elif kind == "smi":
        ok, line = smi(text)
    else:
        raise SystemExit(f"check.py: unknown check {kind!r}")
    print(line)
    return 0 if ok else 1


sys.exit(main(sys.argv[1:]))
PY

now_ns() { date +%s%N; }
ms_since() { echo $(( ($(now_ns) - $1) / 1000000 )); }

record() {  # VERDICT STEP DETAIL
    RESULTS+=("$(printf '%-4s  %s: %s' "$1" "$2" "$3")")
    echo ">> $1  $2: $3"
    echo
}

# run FILE SECONDS CMD...: CMD under a time limit; its output shown indented and kept in
# FILE; returns CMD's status (124 when it ran out of time).
run() {
    local file=$1 limit=$2 status=0
    shift 2
    echo "\$ $*"
    timeout "$limit" "$@" >"$file" 2>&1 || status=$?
    sed 's/^/    /' "$file"
    [[ $status -eq 124 ]] && echo "    (stopped after ${limit} s)"
    return "$status"
}

check() { "$PYTHON" "$CHECK" "$@"; }

step_a() {
    local name="(a) nvidia-smi -L" status=0 count
    echo "== $name =="
    if ! command -v nvidia-smi >/dev/null; then
        record FAIL "$name" "nvidia-smi is not on PATH"
        return
    fi
    run "$WORK/a.out" 60 nvidia-smi -L || status=$?
    count=$(grep -c '^GPU [0-9]' "$WORK/a.out" || true)
    if [[ $status -eq 0 && $count -gt 0 ]]; then
        record PASS "$name" "$count GPU(s); $(grep -m1 '^GPU [0-9]' "$WORK/a.out")"
    else
        record FAIL "$name" "exit $status, $count GPU line(s)"
    fi
}

# resolve TAG ENV... -- MEGAPLUG_ARGS...: megaplug resolve under ENV (the JSON kept apart);
# sets status_TAG, ms_TAG and verdict_TAG ("exit 2: <problems>" or "exit 0: valid").
resolve() {
    local tag=$1 status=0 start env=()
    shift
    while [[ $1 != -- ]]; do env+=("$1"); shift; done
    shift
    echo "\$ env ${env[*]} $PYTHON -m megaplug resolve --config $CONFIG" \
         "--tensor-model-parallel-size 2 $*"
    start=$(now_ns)
    timeout 300 env "${env[@]}" "$PYTHON" -m megaplug resolve --config "$CONFIG" \
        --tensor-model-parallel-size 2 "$@" >"$WORK/b-$tag.json" 2>"$WORK/b-$tag.err" \
        || status=$?
    printf -v "ms_$tag" '%s' "$(ms_since "$start")"
    printf -v "status_$tag" '%s' "$status"
    printf -v "verdict_$tag" 'exit %s: %s' "$status" "$(check verdict "$WORK/b-$tag.err")"
    sed 's/^/    /' "$WORK/b-$tag.err"
}

step_b() {
    local name="(b) megaplug resolve, capability read from the GPU" start detected detect_ms
    local launch=(-u CUDA_DEVICE_MAX_CONNECTIONS WORLD_SIZE=2 RANK=0 LOCAL_RANK=0)
    echo "== $name =="
    # what every check's config.env.capability() returns when nothing is assumed
    start=$(now_ns)
    detected=$("$PYTHON" -c 'import megaplug
c = megaplug.TargetEnvironment().capability()
print("none" if c is None else "%d.%d" % c)' 2>"$WORK/b-detect.err") || detected="error"
    detect_ms=$(ms_since "$start")
    sed 's/^/    /' "$WORK/b-detect.err"
    echo "megaplug.TargetEnvironment().capability(): $detected (${detect_ms} ms, a fresh process)"
    resolve auto "${launch[@]}" --
    resolve assumed "${launch[@]}" -- --assume-device-capability "$CAPABILITY"
    resolve connections CUDA_DEVICE_MAX_CONNECTIONS=1 WORLD_SIZE=2 RANK=0 LOCAL_RANK=0 --
    echo "auto-detected:                      $verdict_auto (${ms_auto} ms)"
    echo "--assume-device-capability $CAPABILITY:   $verdict_assumed (${ms_assumed} ms)"
    echo "auto, CUDA_DEVICE_MAX_CONNECTIONS=1: $verdict_connections (${ms_connections} ms)"
    local detail="capability $detected; without --assume '$verdict_auto' in ${ms_auto} ms, with"
    detail+=" --assume-device-capability $CAPABILITY '$verdict_assumed' in ${ms_assumed} ms;"
    detail+=" with CUDA_DEVICE_MAX_CONNECTIONS=1 '$verdict_connections'"
    if [[ $detected == "$CAPABILITY" && $verdict_auto == "$verdict_assumed" \
          && $status_connections -eq 0 ]]; then
        record PASS "$name" "$detail"
    else
        record FAIL "$name" "$detail (wanted: capability $CAPABILITY, the same verdict both \
ways, and a valid configuration with the variable set)"
    fi
}

step_c() {
    local name="(c) train_gpt.py --bf16, ~100M parameters, $ITERS iterations on the GPU"
    local status=0 sampler="" detail usage
    echo "== $name =="
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader -lms 500 \
            >"$WORK/c-smi.csv" 2>/dev/null &
        sampler=$!
    fi
    run "$WORK/c.out" 600 "$PYTHON" examples/train_gpt.py "${TRAIN_FLAGS[@]}" \
        --train-iters "$ITERS" || status=$?
    if [[ -n $sampler ]]; then
        kill "$sampler" 2>/dev/null || true
        wait "$sampler" 2>/dev/null || true
        usage=$(check smi "$WORK/c-smi.csv" || true)
        echo "nvidia-smi during the run: $usage"
    fi
    if detail=$(check train "$WORK/c.out") && [[ $status -eq 0 ]]; then
        record PASS "$name" "$detail${usage:+; $usage}"
    else
        record FAIL "$name" "exit $status; $detail${usage:+; $usage}"
    fi
}

step_d() {
    local name="(d) checkpoints across devices (GPU -> CPU -> GPU)" status=0 first cpu gpu detail
    local flags=(--config "$SMALL_CONFIG" --save-interval 2)
    echo "== $name =="
    run "$WORK/d1.out" 300 "$PYTHON" examples/train_gpt.py "${flags[@]}" --train-iters 2 \
        --save "$WORK/ckpt-gpu" || status=$?
    run "$WORK/d2.out" 300 env CUDA_VISIBLE_DEVICES= "$PYTHON" examples/train_gpt.py \
        "${flags[@]}" --train-iters 4 --load "$WORK/ckpt-gpu" --save "$WORK/ckpt-cpu" \
        || status=$?
    run "$WORK/d3.out" 300 "$PYTHON" examples/train_gpt.py "${flags[@]}" --train-iters 6 \
        --load "$WORK/ckpt-cpu" || status=$?
    local ok=1
    first=$(check resume "$WORK/d1.out" cuda) || ok=0
    cpu=$(check resume "$WORK/d2.out" cpu 2) || ok=0
    gpu=$(check resume "$WORK/d3.out" cuda 4) || ok=0
    detail="trained $first; then $cpu; then $gpu"
    if [[ $ok -eq 1 && $status -eq 0 ]]; then
        record PASS "$name" "$detail"
    else
        record FAIL "$name" "exit $status; $detail"
    fi
}

step_e() {
    local name="(e) torchrun, 2 ranks over NCCL" gpus status=0 mismatch_status=0 detail why
    local torchrun=("$PYTHON" -m torch.distributed.run --standalone --nproc-per-node 2)
    echo "== $name =="
    gpus=$("$PYTHON" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
    if [[ $gpus -lt 2 ]]; then
        record SKIP "$name" "$gpus GPU(s) here; NCCL needs a GPU per rank"
        return
    fi
    run "$WORK/e1.out" 600 "${torchrun[@]}" examples/train_gpt.py "${TRAIN_FLAGS[@]}" \
        --global-batch-size 16 --train-iters 20 || status=$?
    run "$WORK/e2.out" 300 env TRAIN_GPT_EXTRA_ARGS_RANK1="--seed 7" "${torchrun[@]}" \
        examples/train_gpt.py --config "$SMALL_CONFIG" || mismatch_status=$?
    local ok=1
    detail=$(check ddp "$WORK/e1.out") || ok=0
    why=$(check mismatch "$WORK/e2.out") || ok=0
    # the second run must fail, naming the differing seed
    if [[ $ok -eq 1 && $status -eq 0 && $mismatch_status -ne 0 ]]; then
        record PASS "$name" "$detail; differing seeds: $why"
    else
        record FAIL "$name" "exit $status; $detail; differing seeds (exit $mismatch_status): $why"
    fi
}

main() {
    echo "gpu-check-example: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(hostname)"
    echo "checkout: $(git rev-parse --short HEAD 2>/dev/null || echo '?') in $PWD"
    "$PYTHON" - <<'PY' || true
import platform, sys
import torch
import megaplug
print(f"python {platform.python_version()} ({sys.executable}); torch {torch.__version__}, "
      f"CUDA {torch.version.cuda}, {torch.cuda.device_count()} GPU(s) visible; "
      f"megaplug {megaplug.__version__}")
PY
    echo
    step_a
    step_b
    step_c
    step_d
    step_e
    echo "== summary =="
    local line failed=0 passed=0 skipped=0
    for line in "${RESULTS[@]}"; do
        echo "$line"
        case $line in
            PASS*) passed=$((passed + 1)) ;;
            SKIP*) skipped=$((skipped + 1)) ;;
            *) failed=$((failed + 1)) ;;
        esac
    done
    echo "gpu-check-example: $passed PASS, $failed FAIL, $skipped SKIP (log: $LOG)"
    [[ $failed -eq 0 ]]
}

mkdir -p "$LOG_DIR"
status=0
main 2>&1 | tee "$LOG" || status=$?
exit "$status"
