#!/usr/bin/env bash
# What both release comparisons run in: a Megatron release's source from its git tag,
# unpacked once under $TMPDIR, and the tier's Python with what older releases import (six,
# pydantic). Source it with the tag as $1; it sets SOURCE and PYTHON.
# MEGATRON_GIT_DIR: Megatron-LM's git directory (default: the session's mirror).
GIT_DIR="${MEGATRON_GIT_DIR:-/work/.mirror/NVIDIA+Megatron-LM/repo}"
SOURCE="${TMPDIR:-/tmp}/megaplug-megatron-$1"
if [ ! -d "$SOURCE/megatron/training" ]; then
    mkdir -p "$SOURCE"
    git --git-dir="$GIT_DIR" archive "$1" megatron | tar -x -C "$SOURCE"
fi
PYTHON="$(bash scripts/megatron-overlay.sh "${TMPDIR:-/tmp}/megaplug-megatron-releases" six pydantic)"
