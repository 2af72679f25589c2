"""Engine overhead: ice_mcp against LangGraph on the same graphs, in one process.

Shapes: a chain of 1,000 no-op nodes, and a 1 → 1,000 → 1 fan-out. Prints µs per node and the ratio to
LangGraph's `ainvoke` of its compiled graph for three ways in on our side: the engine (`orc.run(plan)`, a plan
compiled beforehand), the public `ice_mcp.run(bp)` with a Blueprint object it ran before (its plan kept, as
LangGraph's graph is compiled once), and `ice_mcp.run(bp)` with a new Blueprint object each time (compiling it
is inside the time); runs go to SQLite, events and metrics on. The ways take turns, so load on the machine falls
on all alike; each is timed on the second of two runs in a row (it collects the garbage of a run of its own
kind, as in a steady state); medians. Then peak memory of a 10,000-node run.
Run: `.venv/bin/python bench/engine.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import operator
import os
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ice_mcp
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


Sample = Callable[[], Awaitable[float]]


def engine_sample(orc: Orchestrator, blueprint: Blueprint) -> Sample:
    """`orc.run(plan)`: the plan compiled once, as a registered workflow is."""
    plan = orc.compile(blueprint)

    async def sample() -> float:
        started = time.perf_counter()
        record = await orc.run(plan)
        elapsed = time.perf_counter() - started
        assert record.status == "succeeded", record.error
        return elapsed

    return sample


def public_sample(make: Callable[[], Blueprint], new: bool) -> Sample:
    """`ice_mcp.run(bp)` on the default orchestrator: the same Blueprint object each time, or a new one."""
    kept = make()

    async def sample() -> float:
        blueprint = make() if new else kept  # made outside the time: the caller's model, as LangGraph's graph
        started = time.perf_counter()
        record = await ice_mcp.run(blueprint)
        elapsed = time.perf_counter() - started
        assert record.status == "succeeded", record.error
        return elapsed

    return sample


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


def langgraph_sample(build: Callable[[int], Any], n: int, initial: dict[str, Any]) -> Sample:
    """LangGraph's `ainvoke` of a graph built and compiled beforehand."""
    app = build(n)

    async def sample() -> float:
        started = time.perf_counter()
        await app.ainvoke(initial, {"recursion_limit": n + 10})
        return time.perf_counter() - started

    return sample


async def medians(samples: dict[str, Sample], repeat: int) -> dict[str, float]:
    """Each way's median over `repeat` rounds, every way once per round (load on the machine falls on all alike).
    A way runs twice in a row and the second run is timed: it collects the garbage a run of its own kind left,
    as in a steady state."""
    times: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(repeat):
        for name, sample in samples.items():
            await sample()
            times[name].append(await sample())
    return {name: statistics.median(found) for name, found in times.items()}


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
        os.environ["ICE_MCP_DATA_DIR"] = tmp  # the default orchestrator's run store, made on first use
        ice_mcp.tool(noop)  # where `ice_mcp.run` finds tools: DEFAULT_REGISTRY
        orc = make_orchestrator(Path(tmp) / "engine")
        for kept in (orc, ice_mcp.default_orchestrator()):
            # A process keeps its latest 512 runs. Kept to 4 here, the heap is steady from the start, instead of
            # growing all along with every way's garbage collections (LangGraph's too) walking more kept runs.
            kept.engine.runs.limit = 4
        rows = []
        for shape, make, build, initial, nodes in (
            ("chain 1000", lambda: chain_blueprint(N), langgraph_chain, {"step": 0}, N),
            ("fan-out 1→1000→1", lambda: fanout_blueprint(N), langgraph_fanout, {"done": []}, N + 2),
        ):
            found = await medians({"engine: orc.run(plan)": engine_sample(orc, make()),
                                   "ice_mcp.run(bp), bp run before": public_sample(make, new=False),
                                   "ice_mcp.run(bp), a new bp": public_sample(make, new=True),
                                   "LangGraph": langgraph_sample(build, N, initial)}, repeat)
            lang = found.pop("LangGraph") / nodes * 1e6
            rows += [(shape, way, seconds / nodes * 1e6, lang) for way, seconds in found.items()]
        print(f"{'shape':<18} {'ice_mcp':<32} {'ice_mcp µs/node':>16} {'LangGraph µs/node':>18} {'ratio':>7}")
        for shape, way, ice, lang in rows:
            print(f"{shape:<18} {way:<32} {ice:>16.1f} {lang:>18.1f} {lang / ice:>6.1f}x")
        peak, elapsed = await peak_memory(orc, 10_000)
        print(f"10,000-node fan-out: peak traced memory {peak:.1f} MiB, {elapsed * 1e3:.0f} ms "
              f"(tracemalloc on; {elapsed / 10_002 * 1e6:.1f} µs/node)")
        await orc.aclose()
        await ice_mcp.default_orchestrator().aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
