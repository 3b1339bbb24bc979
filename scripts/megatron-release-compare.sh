#!/usr/bin/env bash
# A Megatron release from its git tag against megaplug at that release (the tier's Python,
# the tag's source first on PYTHONPATH): scripts/megatron-release-compare.py says what it does.
#
#   bash scripts/megatron-release-compare.sh core_v0.15.3 [--json FILE] [--derived-keys FILE]
#   bash scripts/megatron-release-compare.sh d98e8a64dd   (Megatron-LM main)
#   bash scripts/megatron-release-compare.sh 0.19.2       (a wheel with no tag: the tier's own)
# MEGATRON_GIT_DIR: Megatron-LM's git directory (scripts/megatron-release-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:?usage: megatron-release-compare.sh TAG [--json FILE]}"; shift
. scripts/megatron-release-env.sh "$TAG"  # SOURCE, PYTHON
VERSION="${TAG#core_v}"
[ "$VERSION" = "$TAG" ] && [ -n "$SOURCE" ] && VERSION=main  # a commit of Megatron-LM main (d98e8a64dd)
PYTHONPATH="$SOURCE${SOURCE:+${PYTHONPATH:+:}}${PYTHONPATH:-}" exec "$PYTHON" -W ignore \
    scripts/megatron-release-compare.py "$VERSION" "$@"
