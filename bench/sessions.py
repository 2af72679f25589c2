"""Session flood: N `initialize` requests from one client against a real `ice-mcp serve --http`.

    python bench/sessions.py                 # 10,000 attempts, default caps
    python bench/sessions.py --attempts 2000

Prints the server's RSS before and after, the worst /healthz latency seen meanwhile from a second
client, and whether another peer (127.0.0.2) still opens a session; exits non-zero if it cannot.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "1"}},
}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=10_000)
    args = parser.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        env = {**os.environ, "ICE_MCP_DATA_DIR": data, "ICE_MCP_WORKSPACE": data, "PYTHONPATH": str(ROOT)}
        server = subprocess.Popen(
            [sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stderr=subprocess.DEVNULL,
        )
        try:
            for _ in range(300):
                try:
                    if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.HTTPError:
                    time.sleep(0.1)
            latencies: list[float] = []
            stop = threading.Event()

            def probe() -> None:
                with httpx2.Client(timeout=5) as client:
                    while not stop.is_set():
                        started = time.perf_counter()
                        client.get(f"{url}/healthz")
                        latencies.append(time.perf_counter() - started)
                        stop.wait(0.02)

            with httpx2.Client(timeout=30) as http:
                http.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS)
                before = rss_mb(server.pid)
                prober = threading.Thread(target=probe, daemon=True)
                prober.start()
                started = time.perf_counter()
                statuses: dict[int, int] = {}
                for _ in range(args.attempts):
                    status = http.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS).status_code
                    statuses[status] = statuses.get(status, 0) + 1
                elapsed = time.perf_counter() - started
                stop.set()
                prober.join()
                after = rss_mb(server.pid)
            other = httpx2.Client(transport=httpx2.HTTPTransport(local_address="127.0.0.2"), timeout=30)
            with other:
                honest = other.post(f"{url}/mcp", json=INITIALIZE, headers=HEADERS).status_code
            print(f"{args.attempts} session attempts from one client in {elapsed:.1f} s; statuses {statuses}")
            print(f"server RSS: {before:.1f} MB before, {after:.1f} MB after ({after - before:+.1f} MB)")
            ms = sorted(x * 1000 for x in latencies)
            print(
                f"/healthz meanwhile ({len(ms)} probes): p50 {ms[len(ms) // 2]:.0f} ms, "
                f"p99 {ms[int(len(ms) * 0.99)]:.0f} ms, max {ms[-1]:.0f} ms; another peer's initialize: {honest}"
            )
            return 0 if honest == 200 else 1
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
