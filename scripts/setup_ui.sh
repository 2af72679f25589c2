#!/usr/bin/env bash
# What the browser tests of the run view (tests/ui) need beyond pyproject's `test` extras; safe to run again.
#   - chromium (Debian): a headless browser that Playwright drives (`executable_path`); never `playwright install`
# Environment: SKIP_APT=1 to leave system packages alone.
set -euo pipefail

log() { printf '[setup_ui] %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

if command -v chromium >/dev/null && [ -x /usr/bin/chromium ]; then
  log "chromium already installed"
elif [ "${SKIP_APT:-0}" = 1 ]; then
  log "SKIP_APT=1: not installing chromium"
else
  log "installing chromium"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq chromium >/dev/null
fi
if command -v chromium >/dev/null; then
  log "$(chromium --version 2>/dev/null | head -1) (Debian package $(dpkg-query -W -f '${Version}' chromium 2>/dev/null || echo '?'))"
fi

log "done"
