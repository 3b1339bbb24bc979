#!/usr/bin/env bash
# Build (or reuse) the Python 3.12 environment holding Megatron-LM's released code
# (megatron-core's wheel carries megatron/training/), used as the reference by the
# `-m megatron` test tier. It lives outside the checkout because torch on 3.12 is the
# registry's CUDA build (~3 GB): CI on the same machine reuses it.
#
# Prints the environment's python on stdout; everything else goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
MEGATRON_CORE_VERSION="0.19.2"
TORCH_VERSION="2.14.1"
ENV_DIR="${MEGAPLUG_MEGATRON_ENV:-$HOME/.cache/megaplug/megatron-core-$MEGATRON_CORE_VERSION-py312}"
STAMP="$ENV_DIR/.megaplug-stamp"
# What the environment must hold; a change here rebuilds it.
WANT="megatron-core==$MEGATRON_CORE_VERSION torch==$TORCH_VERSION numpy packaging pyyaml pluggy pytest sentencepiece tiktoken"

find_python312() {
    for candidate in "${PYTHON312:-}" python3.12 "$HOME/.pyenv/versions/3.12.1/bin/python3.12" \
                     /root/.pyenv/versions/3.12.1/bin/python3.12; do
        [ -n "$candidate" ] || continue
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
            command -v "$candidate"; return 0
        fi
    done
    return 1
}

# Older releases whose wheels carry megatron/training (0.17 on): their code alone, installed
# with --no-deps beside the environment, and put first on PYTHONPATH over it by the tier test
# that compares each release's own parser (tests/megatron/test_megatron_release_parsers.py).
OLDER_RELEASES="0.17.1"
RELEASES_DIR="${MEGAPLUG_MEGATRON_RELEASES:-$HOME/.cache/megaplug}"

older_releases() {
    for version in $OLDER_RELEASES; do
        local dir="$RELEASES_DIR/megatron-core-$version"
        if [ ! -f "$dir/.megaplug-stamp" ]; then
            echo "megatron-env: megatron-core $version's code in $dir" >&2
            rm -rf "$dir"
            "$ENV_DIR/bin/python" -m pip install --quiet --no-deps --target "$dir" \
                "megatron-core==$version" 2>&1 | { grep -v "^WARNING: Location" || true; } >&2
            echo "$version" > "$dir/.megaplug-stamp"
        fi
    done
}

# megaplug-bridge's judges beside the environment (never in it): Megatron's config container
# loads YAML through omegaconf (PretrainConfigContainer.from_yaml), and Megatron-Bridge's
# code alone, its config modules' own imports listed in docs/interop.md. Installed with
# --no-deps into one directory the bridge plugin's tier tests put on sys.path.
INTEROP_PACKAGES="omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 megatron-bridge==0.6.2"
INTEROP_DIR="${MEGAPLUG_MEGATRON_INTEROP:-$RELEASES_DIR/megaplug-interop-py312}"

interop_packages() {
    if [ ! -f "$INTEROP_DIR/.megaplug-stamp" ] || [ "$(cat "$INTEROP_DIR/.megaplug-stamp")" != "$INTEROP_PACKAGES" ]; then
        echo "megatron-env: $INTEROP_PACKAGES in $INTEROP_DIR" >&2
        rm -rf "$INTEROP_DIR"
        # shellcheck disable=SC2086
        "$ENV_DIR/bin/python" -m pip install --quiet --no-deps --target "$INTEROP_DIR" \
            $INTEROP_PACKAGES 2>&1 | { grep -v "^WARNING: Location" || true; } >&2
        echo "$INTEROP_PACKAGES" > "$INTEROP_DIR/.megaplug-stamp"
    fi
}

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && "$ENV_DIR/bin/python" -c 'import megatron.core, megatron.training.arguments' >/dev/null 2>&1; then
    older_releases
    interop_packages
    echo "$ENV_DIR/bin/python"; exit 0
fi

PY312="$(find_python312)" || { echo "megatron-env: no Python 3.12 found (set PYTHON312)" >&2; exit 1; }
echo "megatron-env: building $ENV_DIR with $PY312 (torch's CUDA build, ~3 GB, once)" >&2
rm -rf "$ENV_DIR"
mkdir -p "$(dirname "$ENV_DIR")"
"$PY312" -m venv "$ENV_DIR"
"$ENV_DIR/bin/python" -m pip install --quiet --upgrade pip >&2
# shellcheck disable=SC2086
"$ENV_DIR/bin/python" -m pip install --quiet $WANT >&2
echo "$WANT" > "$STAMP"
older_releases
interop_packages
echo "$ENV_DIR/bin/python"
