#!/usr/bin/env bash
# PostgreSQL's server programs for the tests of the PostgreSQL run store (`--state postgresql://`); safe to run again.
#   - Debian's package `postgresql` (15 on bookworm): initdb and postgres in /usr/lib/postgresql/N/bin. The tests
#     start their own server (ice_mcp_dev/cluster.py's PostgresProcess): `initdb` into a temporary folder and
#     `postgres` on a free loopback port, nothing else. Debian's own cluster, if the package made one, is left
#     alone (not started by us).
#   - Run as root (CI, this machine), PostgreSQL refuses to start: PostgresProcess then runs initdb and postgres as
#     the `postgres` user the package creates (`setpriv`), in a folder it owns. This script checks that user exists.
# Environment: SKIP_APT=1 to leave system packages alone.
set -euo pipefail

log() { printf '[setup_postgres] %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

have_postgres() { ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v initdb >/dev/null; }

if have_postgres; then
  log "PostgreSQL already installed: $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1 || command -v initdb)"
elif [ "${SKIP_APT:-0}" = 1 ]; then
  log "SKIP_APT=1: not installing postgresql"
  exit 0
else
  log "installing postgresql (Debian)"
  as_root apt-get update -qq
  # The package's own cluster is not wanted: the tests make theirs. policy-rc.d keeps it from starting here.
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq postgresql >/dev/null
fi

bin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
[ -n "$bin" ] || bin="$(dirname "$(command -v initdb)")"
log "$("$bin/postgres" --version)"
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
  log "running as root without a postgres user: the tests run PostgreSQL as nobody"
fi
