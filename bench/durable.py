"""Durable runs: what the journal costs per node, and how long a restart takes to resume 100 runs.

1. Journal cost: a chain of 1,000 no-op nodes with the run store on (every event journaled by the
   writer thread) and off, interleaved; the difference per node is the journal's cost.
2. Resume: 100 runs of a 6-node workflow stopped at node 3 by a server shutdown; a new orchestrator
   on the same data folder takes them over (`recover_interrupted_runs`) and finishes them.
Run: `.venv/bin/python bench/durable.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.blueprint.models import Blueprint

RUNS = 100
N = 1_000


async def noop() -> dict[str, Any]:
    return {}


def chain(n: int) -> Blueprint:
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "noop", **({"dependencies": [f"n{i - 1}"]} if i else {})}
             for i in range(n)]
    return Blueprint.model_validate({"name": "chain", "nodes": nodes, "max_parallel": 64})


async def journal_cost(repeat: int) -> tuple[float, float]:
    registry = Registry()
    registry.add_tool(noop)
    with tempfile.TemporaryDirectory() as folder:
        on = Orchestrator(registry=registry, settings=Settings(data_dir=Path(folder)))
        off = Orchestrator(registry=registry, settings=Settings(data_dir=Path(folder), persist_runs=False))
        plan = on.compile(chain(N))
        samples: dict[str, list[float]] = {"on": [], "off": []}
        journaled = ""
        for _ in range(repeat):
            for name, orc in (("on", on), ("off", off)):
                started = time.perf_counter()
                record = await orc.run(plan)
                samples[name].append((time.perf_counter() - started) / N * 1e6)
                assert record.status == "succeeded"
                journaled = record.run_id if name == "on" else journaled
        assert on.store is not None and on.store.flush()
        assert len(on.store.events(journaled)) == 2 * N + 2  # every node's start and end, kept
        await on.aclose()
        await off.aclose()
    return statistics.median(samples["on"]), statistics.median(samples["off"])


async def resume_time() -> tuple[float, float]:
    gate = asyncio.Event()

    async def step(i: int) -> dict[str, Any]:
        if i == 3:
            await gate.wait()
        return {"i": i}

    registry = Registry()
    registry.add_tool(step)
    nodes = [{"id": f"s{i}", "type": "tool", "tool_name": "step", "tool_args": {"i": i},
              **({"dependencies": [f"s{i - 1}"]} if i > 1 else {})} for i in range(1, 7)]
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(data_dir=Path(folder))
        first = Orchestrator(registry=registry, settings=settings)
        first.register_blueprint({"name": "six", "nodes": nodes})
        handles = [await first.start("six") for _ in range(RUNS)]
        while not all(getattr(h.record.nodes.get("s3"), "status", None) == "running" for h in handles):
            await asyncio.sleep(0.01)
        await first.aclose(suspend=True)  # a server stopping: its runs stay `running`

        second = Orchestrator(registry=registry, settings=settings)
        gate.set()
        started = time.perf_counter()
        resumed = second.recover_interrupted_runs()
        took_over = time.perf_counter() - started
        assert resumed == RUNS, resumed
        records = [await second.get_handle(h.run_id).wait() for h in handles]  # type: ignore[union-attr]
        finished = time.perf_counter() - started
        assert all(r.status == "succeeded" for r in records)
        await second.aclose()
    return took_over, finished


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    on, off = await journal_cost(args.repeat)
    print(f"chain of {N:,} no-op nodes: {on:.1f} µs/node journaled, {off:.1f} µs/node without a store: "
          f"journal {on - off:+.1f} µs/node ({(on / off - 1) * 100:+.0f} %)")
    took_over, finished = await resume_time()
    print(f"restart with {RUNS} interrupted 6-node runs: taken over and resumed in {took_over * 1000:.0f} ms, "
          f"all finished {finished * 1000:.0f} ms after the restart")


if __name__ == "__main__":
    asyncio.run(main())
