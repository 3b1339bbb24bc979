#!/usr/bin/env bash
# Megatron-LM's own unit tests, run twice: (a) as Megatron ships them, (b) with megaplug
# switched in for megatron.training.arguments (pytest -p megaplug.megatron.pytest_switch).
#
#   MEGATRON_LM=/path/to/Megatron-LM bash scripts/megatron-own-tests.sh [TEST_FILE...]
#
# TEST_FILEs are paths inside the Megatron-LM checkout (default: its CPU-runnable tests of
# argument parsing and validation, below). The checkout comes first on sys.path, so its
# own `megatron` package is the one tested, on top of the Megatron tier's cached Python 3.12
# environment (torch, megatron-core's dependencies; scripts/megatron-env.sh). This
# checkout's megaplug and plugins are installed editable into an overlay environment
# outside the checkout (MEGAPLUG_OWN_TESTS_VENV), with the few packages Megatron's tests
# need besides. Each mode is one pytest session over the files; nothing is written into the
# Megatron-LM tree.
#
# Prints a table per file, (a) against (b), and the tests that pass in (a) but not in (b).
# Exits 1 when (b) is worse than (a) for any test, 2 on a setup problem.
set -euo pipefail
cd "$(dirname "$0")/.."
CHECKOUT="$(pwd)"
MEGATRON_LM="${MEGATRON_LM:-/tmp/mlm}"
if [ ! -f "$MEGATRON_LM/megatron/training/arguments.py" ]; then
    echo "megatron-own-tests: MEGATRON_LM=$MEGATRON_LM is not a Megatron-LM checkout" >&2
    exit 2
fi
MEGATRON_LM="$(cd "$MEGATRON_LM" && pwd)"
SESSION_TIMEOUT="${SESSION_TIMEOUT:-1800}"

# Megatron-LM's unit tests that exercise its argument parser, validate_args or the
# argument helpers and pass at least in part without a GPU or NCCL (found with
# `grep -rl "parse_args\|validate_args\|get_args" tests/unit_tests`, then run on a CPU; the
# others there need a GPU for every test that touches the arguments).
DEFAULT_FILES=(
    tests/unit_tests/test_argument_utils.py
    tests/unit_tests/test_eval_batch_size.py
    tests/unit_tests/test_fault_injector.py
    tests/unit_tests/test_model_parallel_config.py
    tests/unit_tests/test_start_eval_at_iter.py
    tests/unit_tests/inference/test_inference_config.py
    tests/unit_tests/models/mimo/test_mimo_hetero_grid_args.py
    tests/unit_tests/models/mimo/test_nemotron_moe_vlm_provider.py
    tests/unit_tests/rl/test_rl_utils.py
    tests/unit_tests/rl/test_sequence_packing_utils.py
)
# What megatron.rl imports that megatron-core's wheel does not bring.
TEST_DEPENDENCIES=(wandb openai fastapi uvicorn)

OVERLAY="${MEGAPLUG_OWN_TESTS_VENV:-/tmp/megaplug-own-tests-$(id -u)-$(printf '%s' "$CHECKOUT" | cksum | cut -d' ' -f1)}"
OVERLAY_PYTHON="$(bash scripts/megatron-overlay.sh "$OVERLAY" "${TEST_DEPENDENCIES[@]}")"

if [ "$#" -gt 0 ]; then
    files=("$@")
else
    files=("${DEFAULT_FILES[@]}")
fi
RESULTS="$(mktemp -d "${TMPDIR:-/tmp}/megatron-own-tests.XXXXXX")"
echo "megatron-own-tests: Megatron-LM $(git -C "$MEGATRON_LM" rev-parse --short=10 HEAD 2>/dev/null || echo '(not a git checkout)') at $MEGATRON_LM; logs in $RESULTS" >&2
for file in "${files[@]}"; do
    if [ ! -f "$MEGATRON_LM/$file" ]; then
        echo "megatron-own-tests: no such test file in $MEGATRON_LM: $file" >&2
        exit 2
    fi
done

# One pytest session per mode (Megatron's import costs most of a run); the per-file table
# comes from the JUnit report. Megatron's addopts (-s, durations) are left out: the logs
# are for reading failures.
for mode in a b; do
    switch=()
    [ "$mode" = b ] && switch=(-p megaplug.megatron.pytest_switch)
    ( cd "$MEGATRON_LM" && PYTHONPATH="$MEGATRON_LM" PYTHONDONTWRITEBYTECODE=1 \
        timeout "$SESSION_TIMEOUT" "$OVERLAY_PYTHON" -m pytest -p no:cacheprovider \
        -o addopts= -q -rfE --continue-on-collection-errors "${switch[@]}" \
        --junitxml="$RESULTS/$mode.xml" "${files[@]}" > "$RESULTS/$mode.log" 2>&1 ) \
        && rc=0 || rc=$?
    echo "$rc" > "$RESULTS/$mode.rc"
    echo "megatron-own-tests: mode ($mode) $([ "$mode" = a ] && echo "as shipped" || echo "megaplug switched in"): pytest exit $rc, $(tail -n 1 "$RESULTS/$mode.log")" >&2
done

"$OVERLAY_PYTHON" - "$RESULTS" "${files[@]}" <<'PY'
"""Compare the two modes' JUnit reports test by test; print the table; exit 1 when a test
that passes as shipped does not pass with megaplug."""
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

results, files = Path(sys.argv[1]), sys.argv[2:]
modules = {file: file.removesuffix(".py").replace("/", ".") for file in files}


def file_of(case: ElementTree.Element) -> str | None:
    # classname is the test module (a collection error: empty, the module in name), then
    # the class, if any
    dotted = case.get("classname") or case.get("name") or ""
    for file, module in modules.items():
        if dotted == module or dotted.startswith(module + "."):
            return file
    return None


def outcomes(mode: str) -> dict[str, dict[str, str]] | None:
    report = results / f"{mode}.xml"
    if not report.is_file():
        return None
    found: dict[str, dict[str, str]] = {file: {} for file in files}
    for case in ElementTree.parse(report).iter("testcase"):
        file = file_of(case)
        if file is None:
            continue
        kinds = {child.tag for child in case}
        found[file][f"{case.get('classname')}::{case.get('name')}"] = (
            "failed" if kinds & {"failure", "error"} else
            "skipped" if "skipped" in kinds else "passed")
    return found


def counts(tests: dict[str, str]) -> str:
    return " / ".join(str(sum(1 for value in tests.values() if value == kind))
                      for kind in ("passed", "failed", "skipped"))


by_mode = {mode: outcomes(mode) for mode in "ab"}
for mode, found in by_mode.items():
    if found is None:
        rc = (results / f"{mode}.rc").read_text().strip()
        print(f"mode ({mode}) left no report (pytest exit {rc}); see {results}/{mode}.log")
        sys.exit(1 if mode == "b" else 2)

print("| Megatron-LM test file | (a) as shipped: pass / fail / skip | "
      "(b) megaplug: pass / fail / skip | (b) vs (a) |")
print("|---|---|---|---|")
regressions, passed, total = [], {"a": 0, "b": 0}, 0
for file in files:
    shipped, switched = by_mode["a"][file], by_mode["b"][file]
    worse = sorted(test for test, outcome in shipped.items()
                   if outcome == "passed" and switched.get(test) != "passed")
    better = sorted(test for test, outcome in switched.items()
                    if outcome == "passed" and shipped.get(test) != "passed")
    regressions += [f"{file}: {test} ({switched.get(test, 'missing')})" for test in worse]
    total += len(shipped)
    for mode in "ab":
        passed[mode] += sum(1 for value in by_mode[mode][file].values() if value == "passed")
    verdict = (f"worse ({len(worse)})" if worse else f"better (+{len(better)})" if better
               else "same")
    print(f"| {file} | {counts(shipped)} | {counts(switched)} | {verdict} |")
print(f"\n{total} tests in {len(files)} files: {passed['a']} pass as shipped, {passed['b']} "
      "with megaplug switched in.")
if regressions:
    print(f"\nPass as shipped, not with megaplug ({len(regressions)}):")
    for line in regressions:
        print(f"  {line}")
    sys.exit(1)
PY
