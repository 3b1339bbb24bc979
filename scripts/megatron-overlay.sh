#!/usr/bin/env bash
# A small environment over the cached Megatron one (scripts/megatron-env.sh): it sees the
# cached packages through a .pth file and holds this checkout's megaplug and plugin
# distributions, installed editable (reinstalled only when a distribution's metadata, the
# set of distributions or the extra packages change). Prints the overlay's python.
#
#   bash scripts/megatron-overlay.sh DIR [EXTRA_PACKAGE...]
set -euo pipefail
cd "$(dirname "$0")/.."
OVERLAY="${1:?usage: megatron-overlay.sh DIR [EXTRA_PACKAGE...]}"; shift
EXTRA=("$@")
BASE_PYTHON="$(bash scripts/megatron-env.sh)"
BASE_SITE="$("$BASE_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
if [ ! -x "$OVERLAY/bin/python" ] || [ "$(readlink -f "$OVERLAY/bin/python")" != "$(readlink -f "$BASE_PYTHON")" ]; then
    rm -rf "$OVERLAY"
    "$BASE_PYTHON" -m venv --without-pip "$OVERLAY"
fi
OVERLAY_SITE="$("$OVERLAY/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$BASE_SITE" > "$OVERLAY_SITE/megaplug-megatron-base.pth"
editables=(-e .)
for dist in plugins/*/ examples/megaplug-example-plugin/; do
    [ -f "$dist/pyproject.toml" ] && editables+=(-e "$dist")
done
STAMP="$OVERLAY/.megaplug-overlay-stamp"
want="$( { echo "$PWD ${EXTRA[*]:-}"; for dist in "${editables[@]}"; do
    [ "$dist" = -e ] || cksum "$dist/pyproject.toml"; done; } | cksum)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$want" ]; then
    "$BASE_PYTHON" -m pip --python "$OVERLAY/bin/python" install --quiet --no-deps \
        "${editables[@]}" 2>&1 | { grep -v "^WARNING: Location" || true; } >&2
    if [ "${#EXTRA[@]}" -gt 0 ]; then
        "$BASE_PYTHON" -m pip --python "$OVERLAY/bin/python" install --quiet "${EXTRA[@]}" \
            2>&1 | { grep -v "^WARNING: Location" || true; } >&2
    fi
    echo "$want" > "$STAMP"
fi
echo "$(cd "$OVERLAY" && pwd)/bin/python"
