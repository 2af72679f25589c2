"""Orchestrators connected to real upstream MCP servers, and aimock for the agent test."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from upstream_servers import ROOT, Aimock, Connect, require_servers, write_config  # noqa: E402

from ice_mcp import Orchestrator, Settings  # noqa: E402

AIMOCK_CLI = ROOT / ".tools" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


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
    node = shutil.which("node")
    if node is None or not AIMOCK_CLI.is_file():
        missing = "aimock is not installed: run scripts/setup_llm.sh"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    process = subprocess.Popen(
        [node, str(AIMOCK_CLI), "--port", "0", "--host", "127.0.0.1", "--fixtures",
         str(HERE / "fixtures" / "aimock.json"), "--log-level", "info"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    url = None
    for line in process.stdout:
        if found := re.search(r"listening on (http://127\.0\.0\.1:\d+)", line):
            url = found.group(1)
            break
    if url is None:
        process.kill()
        raise RuntimeError("aimock did not start")
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    yield Aimock(url)
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
