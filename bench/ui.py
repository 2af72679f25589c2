"""The run view under load: a 1,000-node run watched live in headless Chromium while it runs.

Prints, for each run: how many events per second the server's stream delivered (read by a plain client
beside the page) and the page's update lag (an event's server time to the frame that drew it).
Run from the checkout: `PYTHONPATH=. .venv/bin/python bench/ui.py` (needs Debian's chromium, scripts/setup_ui.sh).
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
from playwright.sync_api import sync_playwright

LAYERS, WIDTH = 20, 50  # 1,000 nodes, each reading two nodes of the layer above


def blueprint(name: str, seconds: float) -> dict[str, Any]:
    """The first layer waits 1.5 s (the page opens and subscribes meanwhile); every other node `seconds`."""
    nodes = []
    for layer in range(LAYERS):
        for i in range(WIDTH):
            deps = [] if layer == 0 else sorted({f"n{layer - 1}_{i}", f"n{layer - 1}_{(i * 7 + 3) % WIDTH}"})
            nodes.append({"id": f"n{layer}_{i}", "type": "tool", "tool_name": "sleep",
                          "tool_args": {"seconds": 1.5 if layer == 0 else seconds},
                          **({"dependencies": deps} if deps else {})})
    return {"name": name, "max_parallel": 64, "nodes": nodes}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values[0] if values else 0.0)


def read_stream(url: str, out: dict[str, Any]) -> None:
    """A plain client on the run's event stream: each event's server time and when it arrived."""
    arrivals: list[tuple[float, float, str]] = []  # (server time, arrival time, node id)
    with httpx2.Client(timeout=60) as http, http.stream("GET", url) as stream:
        for line in stream.iter_lines():
            if line.startswith("event: end"):
                break
            if line.startswith("data: "):
                now = time.time()
                arrivals += [(e["ts"], now, e.get("node_id", "")) for e in json.loads(line[6:]).get("events", [])]
    # After the first layer (the page was subscribing): events the run emitted while the page watched.
    gate = min((ts for ts, _, node in arrivals if node.startswith("n1_")), default=0.0)
    after = [(ts, got) for ts, got, _ in arrivals if ts >= gate]
    emitted = max(ts for ts, _ in after) - gate if after else 0.0
    delivered = max(got for _, got in after) - gate if after else 0.0
    out.update(count=len(arrivals), after=len(after), emitted=emitted, delivered=delivered,
               lags=[got - ts for ts, got in after])


def measure(base: str, page: Any, name: str) -> None:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "workflow.run", "params": {"name": name, "wait_seconds": 0}}
    run_id = httpx2.post(f"{base}/rpc", json=rpc, timeout=30).json()["result"]["run_id"]
    stream: dict[str, Any] = {}
    reader = threading.Thread(target=read_stream, args=(f"{base}/ui/api/runs/{run_id}/events?after=-1", stream))
    reader.start()
    page.goto(f"{base}/ui#/runs/{run_id}")
    page.wait_for_selector('#run-status [data-status="succeeded"]', timeout=120_000)
    page.wait_for_function("window.__ice.events >= 2000", timeout=30_000)
    reader.join(timeout=60)
    seen = page.evaluate("({events: window.__ice.events, lags: window.__ice.lags, first: window.__ice.firstEventAt,"
                         " last: window.__ice.lastEventAt, layout: window.__ice.layoutMs})")
    record = httpx2.post(f"{base}/rpc", json={"jsonrpc": "2.0", "id": 2, "method": "run.status",
                                             "params": {"run_id": run_id}}).json()["result"]
    live = seen["lags"]  # the page counts only events pushed after it subscribed, not the backlog
    print(f"{name}: run {record['duration_ms'] / 1000:.1f} s, {stream['count']} events; after the first layer "
          f"the run emitted {stream['after']} events in {stream['emitted'] * 1000:.0f} ms and the stream delivered "
          f"them all {stream['delivered'] * 1000:.0f} ms after the first "
          f"({stream['after'] / max(stream['delivered'], 1e-3):,.0f} events/s; lag p50 "
          f"{percentile(stream['lags'], 50) * 1000:.0f} ms, p95 {percentile(stream['lags'], 95) * 1000:.0f} ms); "
          f"page: {seen['events']} events drawn, update lag p50 {percentile(live, 50) * 1000:.0f} ms, "
          f"p95 {percentile(live, 95) * 1000:.0f} ms, max {max(live, default=0) * 1000:.0f} ms; "
          f"first draw of the graph {seen['layout']:.0f} ms")


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "blueprints"
        folder.mkdir()
        for name, seconds in (("thousand_steady", 0.2), ("thousand_burst", 0.0)):
            (folder / f"{name}.json").write_text(json.dumps(blueprint(name, seconds)))
        port = free_port()
        env = {**os.environ, "ICE_MCP_DATA_DIR": str(Path(tmp) / "data"), "ICE_MCP_WORKSPACE": tmp}
        server = subprocess.Popen([sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port),
                                   "--blueprints", str(folder)], cwd=root, env=env, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.HTTPError:
                    time.sleep(0.1)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=os.environ.get("ICE_MCP_CHROMIUM", "/usr/bin/chromium"),
                                                     args=["--no-sandbox"])
                for name in ("thousand_steady", "thousand_burst"):
                    page = browser.new_page(viewport={"width": 1440, "height": 900})
                    page.goto(f"{base}/ui")
                    measure(base, page, name)
                    page.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
