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

# Build DIR with STAMP's packages in a folder of its own, then move it into place in one
# rename: a tier run (or a session beside this one) that starts meanwhile sees either no
# DIR or a whole one, never one half installed whose stamp another build wrote.
install_whole() {
    local dir="$1" stamp="$2"; shift 2
    local building="$dir.building.$$" old="$dir.old.$$"
    rm -rf "$building"
    "$ENV_DIR/bin/python" -m pip install --quiet --no-deps --target "$building" "$@" 2>&1 \
        | { grep -v "^WARNING: Location" || true; } >&2
    echo "$stamp" > "$building/.megaplug-stamp"
    mv -T "$dir" "$old" 2>/dev/null || true
    # another build placed a whole one first: keep it, drop ours
    mv -T "$building" "$dir" 2>/dev/null || rm -rf "$building"
    rm -rf "$old"
}

older_releases() {
    for version in $OLDER_RELEASES; do
        local dir="$RELEASES_DIR/megatron-core-$version"
        if [ ! -f "$dir/.megaplug-stamp" ]; then
            echo "megatron-env: megatron-core $version's code in $dir" >&2
            install_whole "$dir" "$version" "megatron-core==$version"
        fi
    done
}

# megaplug-bridge's judges beside the environment (never in it): Megatron's config container
# loads YAML through omegaconf (PretrainConfigContainer.from_yaml), and Megatron-Bridge's
# code alone, its config modules' own imports listed in docs/interop.md. Installed with
# --no-deps into one directory the bridge plugin's tier tests put on sys.path. Beside
# omegaconf, what importing megatron.bridge.training.config (ConfigContainer: its data
# builders import datasets and megatron-energon), megatron.bridge.models (AutoBridge) and
# megatron.bridge.training.utils.config_utils needs, found by importing them until they
# import (Transformer Engine stubbed, tests/megatron/bridge_loader.py).
INTEROP_PACKAGES="omegaconf==2.3.0 antlr4-python3-runtime==4.9.3 megatron-bridge==0.6.2 \
transformers==5.12.1 huggingface_hub==1.33.0 tokenizers==0.22.2 safetensors==0.8.0 tqdm==4.70.1 \
httpx==0.29.0 httpcore==1.0.9 h11==0.16.0 rich==15.0.0 einops==0.8.2 \
datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 xxhash==4.1.0 pandas==3.1.2 \
python-dateutil==4.0.0 pyarrow==26.0.1 \
megatron-energon==7.4.1 multi-storage-client==1.3.1 opentelemetry-api==1.45.2 \
opentelemetry-sdk==1.45.2 psutil==7.2.2 xattr==1.3.1 cffi==2.1.1 lark==1.3.1 \
wcmatch==12.0.4 bracex==3.2.4 jsonschema==4.26.0 jsonschema-specifications==2025.9.1 \
referencing==0.37.0 rpds-py==2026.9.1 attrs==26.1.0 braceexpand==0.1.7 rapidyaml==0.15.2 \
deprecation==2.1.0 filetype==1.2.0 webdataset==1.0.2 \
matplotlib==3.11.2 pillow==13.0.0 pyparsing==3.3.3 cycler==0.12.1 kiwisolver==1.5.1 \
fonttools==4.69.1 ipython==9.19.1 traitlets==5.16.1"
INTEROP_DIR="${MEGAPLUG_MEGATRON_INTEROP:-$RELEASES_DIR/megaplug-interop-py312}"

interop_packages() {
    if [ ! -f "$INTEROP_DIR/.megaplug-stamp" ] || [ "$(cat "$INTEROP_DIR/.megaplug-stamp")" != "$INTEROP_PACKAGES" ]; then
        echo "megatron-env: $INTEROP_PACKAGES in $INTEROP_DIR" >&2
        # shellcheck disable=SC2086
        install_whole "$INTEROP_DIR" "$INTEROP_PACKAGES" $INTEROP_PACKAGES
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
