"""Webhook tests use the server tests' helpers (mcp_helpers, live)."""

from __future__ import annotations

import sys
from pathlib import Path

SERVER_TESTS = str(Path(__file__).resolve().parents[1] / "server")
if SERVER_TESTS not in sys.path:
    sys.path.append(SERVER_TESTS)  # appended: other folders' conftest modules keep their precedence
