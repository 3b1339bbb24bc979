#!/usr/bin/env bash
# What both release comparisons run in: a Megatron release's source from its git tag,
# unpacked once under $TMPDIR, and the tier's Python with what older releases import (six,
# pydantic). Source it with the tag as $1; it sets SOURCE and PYTHON.
# MEGATRON_GIT_DIR: Megatron-LM's git directory (default: the session's mirror).
GIT_DIR="${MEGATRON_GIT_DIR:-/work/.mirror/NVIDIA+Megatron-LM/repo}"
# A bare version (0.19.2) is a wheel with no tag: the tier's installed megatron-core, which
# must be that version; SOURCE is then empty and nothing goes before it on PYTHONPATH.
SOURCE="${TMPDIR:-/tmp}/megaplug-megatron-$1"
if [[ "$1" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    SOURCE=""
elif [ ! -d "$SOURCE/megatron/training" ]; then
    mkdir -p "$SOURCE"
    git --git-dir="$GIT_DIR" archive "$1" megatron | tar -x -C "$SOURCE"
fi
PYTHON="$(bash scripts/megatron-overlay.sh "${TMPDIR:-/tmp}/megaplug-megatron-releases" six pydantic)"
if [ -z "$SOURCE" ]; then
    installed="$("$PYTHON" -c 'import importlib.metadata as m; print(m.version("megatron-core"))')"
    if [ "$installed" != "$1" ]; then
        echo "megatron-release-env: the tier has megatron-core $installed, not $1" >&2
        exit 2
    fi
fi
