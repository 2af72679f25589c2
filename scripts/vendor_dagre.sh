#!/usr/bin/env bash
# Vendors @dagrejs/dagre's minified build (`var dagre = ...`: the editor's graph layout) into the /ui static folder, with
# its licence. A classic script in /ui, and inlinable into an MCP App's one module (app_view.py's inliner).
# The file is committed; run this only to move to another version: `bash scripts/vendor_dagre.sh [VERSION]`.
set -euo pipefail
VERSION="${1:-3.1.3}"
HERE="$(cd "$(dirname "$0")/.." && pwd)"
STATIC="$HERE/ice_mcp/server/web/ui/static"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
(cd "$WORK" && npm pack --silent "@dagrejs/dagre@$VERSION" >/dev/null && tar xzf dagrejs-dagre-"$VERSION".tgz)
# The source map is not shipped: its comment goes, so a browser never asks for it.
{ printf '/* @dagrejs/dagre %s (MIT, see dagre.LICENSE.txt): graph layout for the blueprint editor. */\n' "$VERSION"
  grep -v "^//# sourceMappingURL=" "$WORK/package/dist/dagre.min.js" | sed "s/dagre.min.js.LEGAL.txt/dagre.LICENSE.txt/"; } > "$STATIC/dagre.min.js"
cp "$WORK/package/LICENSE" "$STATIC/dagre.LICENSE.txt"
echo "vendored @dagrejs/dagre $VERSION into $STATIC ($(wc -c < "$STATIC/dagre.min.js") bytes)"
