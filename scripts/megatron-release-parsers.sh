#!/usr/bin/env bash
# One Megatron release's own parse_args against megaplug's, from the release's git tag
# (0.13-0.16's wheels carry no megatron/training): tests/megatron/release_parsers.py with the
# tag's source first on PYTHONPATH, in the tier's Python (with six and pydantic, which older
# releases import). Prints the per-configuration tally; the JSON goes to FILE if given.
#
#   bash scripts/megatron-release-parsers.sh core_v0.13.1 [FILE]
#   bash scripts/megatron-release-parsers.sh d98e8a64dd          (Megatron-LM main)
# MEGATRON_GIT_DIR: Megatron-LM's git directory (scripts/megatron-release-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:?usage: megatron-release-parsers.sh TAG [FILE]}"
OUT="${2:-${TMPDIR:-/tmp}/megaplug-release-parsers-$TAG.json}"
. scripts/megatron-release-env.sh "$TAG"  # SOURCE, PYTHON
PYTHONPATH="$SOURCE${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -W ignore \
    tests/megatron/release_parsers.py > "$OUT"
"$PYTHON" - "$OUT" <<'PY'
import collections, json, sys
result = json.load(open(sys.argv[1]))
cases = result["cases"]
same = sum(1 for found in cases.values() if not found)
print(f"release {result['release']}; megaplug targets {result['megaplug']}")
print(f"{same} of {len(cases)} configurations: parse_args namespaces identical")
tally = collections.Counter(d.split(":")[0] for found in cases.values() for d in found)
for what, count in tally.most_common():
    print(f"  {count:4}  {what}")
PY
