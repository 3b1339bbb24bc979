#!/usr/bin/env bash
# The mutation configurations of the per-release rules against a Megatron release from its
# git tag: scripts/megatron-release-mutations.py says what it does.
#
#   bash scripts/megatron-release-mutations.sh core_v0.13.1 [-k NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
TAG="${1:?usage: megatron-release-mutations.sh TAG [-k NAME]}"; shift
. scripts/megatron-release-env.sh "$TAG"  # SOURCE, PYTHON
VERSION="${TAG#core_v}"
[ "$VERSION" = "$TAG" ] && [ -n "$SOURCE" ] && VERSION=main
PYTHONPATH="$SOURCE${SOURCE:+${PYTHONPATH:+:}}${PYTHONPATH:-}" exec "$PYTHON" -W ignore \
    scripts/megatron-release-mutations.py "$VERSION" "$@"
