"""Engine overhead: ice_mcp against LangGraph on the same graphs, in one process.

Shapes: a chain of 1,000 no-op nodes, and a 1 → 1,000 → 1 fan-out. Prints µs
per node for each engine and the ratio; then peak memory of a 10,000-node run.
Run: `.venv/bin/python bench/engine.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import operator
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.blueprint.models import Blueprint

N = 1_000


async def noop() -> dict[str, Any]:
    return {}


def chain_blueprint(n: int) -> Blueprint:
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "noop", **({"dependencies": [f"n{i - 1}"]} if i else {})}
             for i in range(n)]
    return Blueprint.model_validate({"name": "chain", "nodes": nodes, "max_parallel": 64})


def fanout_blueprint(n: int) -> Blueprint:
    middle = [{"id": f"m{i}", "type": "tool", "tool_name": "noop", "dependencies": ["start"]} for i in range(n)]
    nodes = [{"id": "start", "type": "tool", "tool_name": "noop"}, *middle,
             {"id": "end", "type": "tool", "tool_name": "noop", "dependencies": [m["id"] for m in middle]}]
    return Blueprint.model_validate({"name": "fanout", "nodes": nodes, "max_parallel": 64})


def make_orchestrator(data_dir: Path) -> Orchestrator:
    registry = Registry()
    registry.add_tool(noop)
    # The default configuration: runs persisted to SQLite, events and metrics on.
    return Orchestrator(registry=registry, settings=Settings(data_dir=data_dir))


async def time_ice(orc: Orchestrator, blueprint: Blueprint, repeat: int) -> float:
    plan = orc.compile(blueprint)  # compiled once, as a registered workflow is
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        record = await orc.run(plan)
        samples.append(time.perf_counter() - started)
        assert record.status == "succeeded", record.error
    return statistics.median(samples)


# -- LangGraph: the same shapes, no-op async nodes, no checkpointer ----------


class ChainState(TypedDict):
    step: int


class FanState(TypedDict):
    done: Annotated[list[int], operator.add]


def langgraph_chain(n: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(ChainState)

    async def node(state: ChainState) -> dict[str, Any]:
        return {}

    for i in range(n):
        graph.add_node(f"n{i}", node)
        graph.add_edge(START if i == 0 else f"n{i - 1}", f"n{i}")
    graph.add_edge(f"n{n - 1}", END)
    return graph.compile()


def langgraph_fanout(n: int) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(FanState)

    async def node(state: FanState) -> dict[str, Any]:
        return {}

    graph.add_node("start", node)
    graph.add_edge(START, "start")
    names = [f"m{i}" for i in range(n)]
    for name in names:
        graph.add_node(name, node)
        graph.add_edge("start", name)
    graph.add_node("end", node)
    graph.add_edge(names, "end")
    graph.add_edge("end", END)
    return graph.compile()


async def time_langgraph(build: Callable[[int], Any], n: int, initial: dict[str, Any], repeat: int) -> float:
    app = build(n)
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        await app.ainvoke(initial, {"recursion_limit": n + 10})
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def peak_memory(orc: Orchestrator, n: int) -> tuple[float, float]:
    plan = orc.compile(fanout_blueprint(n))
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    record = await orc.run(plan)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert record.status == "succeeded"
    return peak / 2**20, elapsed


async def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        orc = make_orchestrator(Path(tmp))
        rows = []
        for shape, blueprint, build, initial, nodes in (
            ("chain 1000", chain_blueprint(N), langgraph_chain, {"step": 0}, N),
            ("fan-out 1→1000→1", fanout_blueprint(N), langgraph_fanout, {"done": []}, N + 2),
        ):
            await time_ice(orc, blueprint, 2)  # warm-up
            ice = await time_ice(orc, blueprint, repeat) / nodes * 1e6
            await time_langgraph(build, N, initial, 1)
            lang = await time_langgraph(build, N, initial, repeat) / nodes * 1e6
            rows.append((shape, ice, lang))
        print(f"{'shape':<20} {'ice_mcp µs/node':>16} {'LangGraph µs/node':>18} {'ratio':>8}")
        for shape, ice, lang in rows:
            print(f"{shape:<20} {ice:>16.1f} {lang:>18.1f} {lang / ice:>7.1f}x")
        peak, elapsed = await peak_memory(orc, 10_000)
        print(f"10,000-node fan-out: peak traced memory {peak:.1f} MiB, {elapsed * 1e3:.0f} ms "
              f"(tracemalloc on; {elapsed / 10_002 * 1e6:.1f} µs/node)")
        await orc.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
