from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from mcp_helpers import make_orchestrator  # noqa: E402

from ice_mcp.orchestrator import Orchestrator  # noqa: E402


@pytest.fixture
async def orc(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    orchestrator = make_orchestrator(tmp_path)
    yield orchestrator
    await orchestrator.aclose()
