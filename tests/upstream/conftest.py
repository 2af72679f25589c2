"""Orchestrators connected to real upstream MCP servers, and aimock for the agent test."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from llm_mock import Aimock, serve_aimock  # noqa: E402
from upstream_servers import Connect, require_servers, write_config  # noqa: E402

from ice_mcp import Orchestrator, Settings  # noqa: E402


@pytest.fixture(scope="session")
def servers_installed() -> None:
    require_servers()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


@pytest.fixture
async def connect(tmp_path: Path, workspace: Path, servers_installed: None) -> AsyncIterator[Connect]:
    """`await connect({"name": entry, ...})`: an orchestrator using those servers' tools; closed after the test."""
    made: list[Orchestrator] = []

    async def make(servers: dict[str, dict[str, Any]], **options: Any) -> Orchestrator:
        config = write_config(tmp_path / f"mcp-{len(made)}.json", servers)
        settings = Settings(data_dir=tmp_path / "data", workspace=workspace, persist_runs=False)
        orchestrator = Orchestrator(settings=settings, **options)
        made.append(orchestrator)
        await orchestrator.connect_upstream([config])
        return orchestrator

    yield make
    for orchestrator in made:
        await orchestrator.aclose()


@pytest.fixture(scope="session")
def aimock() -> Iterator[Aimock]:
    """aimock on a free loopback port, answering from tests/upstream/fixtures/aimock.json."""
    with serve_aimock(HERE / "fixtures" / "aimock.json", strict_turns=False) as mock:
        yield mock
