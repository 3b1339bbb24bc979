#!/usr/bin/env bash
# The Megatron tier: megaplug checked against Megatron-LM's own released code.
#
# Megatron needs Python 3.12 and torch (the registry's CUDA build on 3.12, ~3 GB), so the
# heavy part lives in a cached environment outside the checkout (scripts/megatron-env.sh).
# This checkout's megaplug and plugin distributions are installed editable into a small
# per-checkout environment, .venv-megatron, that sees the cached one through a .pth file.
# Arguments are passed to pytest (default: every test module under a `megatron/` folder).
set -euo pipefail
cd "$(dirname "$0")/.."
BASE_PYTHON="$(bash scripts/megatron-env.sh)"
BASE_SITE="$("$BASE_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
OVERLAY=.venv-megatron
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
"$BASE_PYTHON" -m pip --python "$OVERLAY/bin/python" install --quiet --no-deps "${editables[@]}" 2>&1 \
    | { grep -v "^WARNING: Location" || true; } >&2
if [ "$#" -eq 0 ]; then
    mapfile -t paths < <(find tests plugins -type d -name megatron -path '*tests/megatron' | sort)
    set -- "${paths[@]}"
fi
exec "$OVERLAY/bin/python" -m pytest -p no:cacheprovider "$@"
