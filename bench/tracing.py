"""What tracing costs a run (issue 25): µs per node on a chain of 1 ms tool nodes with tracing absent, off and on.

    .venv/bin/python bench/tracing.py                 # 200-node chain, 11 rounds per case
    .venv/bin/python bench/tracing.py --nodes 500 --rounds 9

- absent: the OpenTelemetry SDK never imported (no OTEL_* variable: what every user without tracing runs);
- off: the SDK loaded and a provider installed, tracing of runs switched off (`OTEL_TRACES_EXPORTER=none` after
  tracing was on, or a process whose SDK another library loaded);
- on: the real SDK, its BatchSpanProcessor and the real OTLP/HTTP exporter sending to a receiver in another
  process on loopback: a span per node attempt, an `execute_tool` span per tool call, the run's span.
Rounds of off and on alternate, so a machine's drift touches both alike. Each line is the median over rounds;
the same chain of 0 ms nodes shows the engine's own cost beside it (informative: no target).
Targets: absent or off ≤ +3 %, on ≤ +10 % on the 1 ms chain. Exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ice_mcp import Orchestrator, Registry, Settings  # noqa: E402
from ice_mcp.observability import tracing  # noqa: E402

RECEIVER = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get('Content-Length', '0')))
        self.send_response(200); self.send_header('Content-Length', '0'); self.end_headers()
    def log_message(self, *a): pass
server = http.server.HTTPServer(('127.0.0.1', 0), Sink)
print(server.server_port, flush=True)
server.serve_forever()
"""


async def pause(ms: float = 1.0) -> dict[str, Any]:
    """Wait `ms` milliseconds (an I/O node)."""
    if ms:
        await asyncio.sleep(ms / 1000)
    return {"ok": True}


def chain(name: str, nodes: int, ms: float) -> dict[str, Any]:
    return {"name": name, "nodes": [
        {"id": f"n{i}", "type": "tool", "tool_name": "pause", "tool_args": {"ms": ms},
         **({"dependencies": [f"n{i - 1}"]} if i else {})} for i in range(nodes)]}


async def per_node_us(orc: Orchestrator, name: str, nodes: int) -> float:
    started = time.perf_counter()
    record = await orc.run(name, {})
    elapsed = time.perf_counter() - started
    assert record.status == "succeeded", record.error
    return elapsed / nodes * 1e6


def settled() -> None:
    """What is loaded so far lives as long as the process: out of the collector's sight, as `ice-mcp serve` does
    once it is up, so that a full collection walks what the runs made, not the set-up."""
    gc.collect()
    gc.freeze()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    assert "opentelemetry.sdk" not in sys.modules

    folder = Path(tempfile.mkdtemp())
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=folder, persist_runs=False),
                       builtin_tools=False)
    orc.registry.add_tool(pause)
    orc.register_blueprint(chain("io", args.nodes, 1.0))
    orc.register_blueprint(chain("bare", args.nodes, 0.0))
    cases: dict[str, dict[str, list[float]]] = {"absent": {"io": [], "bare": []}, "off": {"io": [], "bare": []},
                                                "on": {"io": [], "bare": []}}

    async def measure(case: str) -> None:
        for workflow in ("io", "bare"):
            cases[case][workflow].append(await per_node_us(orc, workflow, args.nodes))

    for workflow in ("io", "bare"):  # warm-up: compiled plans, first-call imports
        await per_node_us(orc, workflow, args.nodes)
    settled()
    for _ in range(args.rounds):
        await measure("absent")

    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        assert receiver.stdout is not None
        port = int(receiver.stdout.readline())
        on = tracing.configure({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"})
        assert on and "opentelemetry.sdk" in sys.modules
        settled()  # the SDK's modules too
        for _ in range(args.rounds):
            tracing.disable()
            await measure("off")
            tracing.ENABLED = True  # the provider stays installed: switch runs' tracing back on
            await measure("on")
        tracing.shutdown()
    finally:
        receiver.kill()
        await orc.aclose()

    base = statistics.median(cases["absent"]["io"])
    print(f"chain of {args.nodes} tool nodes, median of {args.rounds} rounds (µs per node)")
    print(f"{'case':8} {'1 ms nodes':>12} {'vs absent':>10} {'0 ms nodes':>12}")
    failed = False
    for case, limit in (("absent", None), ("off", 1.03), ("on", 1.10)):
        io, bare = statistics.median(cases[case]["io"]), statistics.median(cases[case]["bare"])
        ratio = io / base
        mark = "" if limit is None else ("  ok" if ratio <= limit else f"  MISSED (target ≤ {limit:.2f})")
        failed |= limit is not None and ratio > limit
        print(f"{case:8} {io:12.1f} {ratio:10.3f} {bare:12.1f}{mark}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
