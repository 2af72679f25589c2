#!/usr/bin/env bash
# promtool, which the metrics tests (tests/observability) run as `promtool check metrics`, into a project-local
# folder (.tools/promtool, gitignored); safe to run again.
#   - Debian's `prometheus` package (bookworm: 2.42), fetched with `apt-get download` and unpacked with
#     `dpkg-deb -x`: no root, nothing installed system-wide, no service started
# Environment: ICE_MCP_PROMTOOL_DIR to unpack elsewhere.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ICE_MCP_PROMTOOL_DIR:-$ROOT/.tools/promtool}"
PROMTOOL="$DEST/usr/bin/promtool"

log() { printf '[setup_promtool] %s\n' "$*" >&2; }

if [[ -x "$PROMTOOL" ]] && "$PROMTOOL" --version >/dev/null 2>&1; then
    log "already installed in $DEST ($("$PROMTOOL" --version 2>&1 | head -1))"
    exit 0
fi

for tool in apt-get dpkg-deb; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        log "$tool is required (a Debian or Ubuntu system)"
        exit 1
    fi
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
sandbox=()
if [[ "$(id -u)" = 0 ]]; then
    sandbox=(-o APT::Sandbox::User=root)  # root's private temp folder is not apt's `_apt` user's to write
fi
log "downloading Debian's prometheus package (for promtool)"
if ! (cd "$work" && apt-get download -qq "${sandbox[@]}" prometheus >/dev/null 2>&1); then
    # A fresh image may have no package lists yet: read them (as setup_ui.sh does), then try again.
    log "no package lists yet: apt-get update"
    if [[ "$(id -u)" = 0 ]]; then apt-get update -qq; else sudo apt-get update -qq; fi
    (cd "$work" && apt-get download -qq "${sandbox[@]}" prometheus >/dev/null)
fi
deb="$(find "$work" -maxdepth 1 -name 'prometheus_*.deb' | head -1)"
if [[ -z "$deb" ]]; then
    log "apt-get download prometheus fetched nothing"
    exit 1
fi
mkdir -p "$DEST"
dpkg-deb -x "$deb" "$work/unpacked"
mkdir -p "$DEST/usr/bin"
cp "$work/unpacked/usr/bin/promtool" "$PROMTOOL.tmp"
mv "$PROMTOOL.tmp" "$PROMTOOL"  # whole or absent: a later run never finds half a binary
log "done ($("$PROMTOOL" --version 2>&1 | head -1), from $(basename "$deb"))"
