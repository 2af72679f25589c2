"""`parallel` nodes: run every branch (`wait: all`) or take the first to succeed (`wait: any`)."""

from __future__ import annotations

import asyncio
from typing import Any

from ice_mcp.blueprint.models import ParallelNode
from ice_mcp.core.context import SubgraphResult
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.errors import NodeFailure, RunStopped
from ice_mcp.nodes.concurrency import run_bounded
from ice_mcp.types import PURE, NodeResult, Usage


async def execute_parallel(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, ParallelNode)
    count = len(spec.branches)

    def job(index: int) -> Any:
        return lambda: call.run_subgraph(f"branch{index}", {}, label=f"{spec.id}[{index}]")

    if spec.wait == "any":
        return await _first_success([job(i) for i in range(count)])
    runs: list[SubgraphResult] = await run_bounded([job(i) for i in range(count)], spec.max_concurrency or count)
    return _result({"branches": [run.output for run in runs]}, runs)


async def _first_success(jobs: list[Any]) -> NodeResult:
    tasks = {asyncio.ensure_future(job()): index for index, job in enumerate(jobs)}
    errors: list[str] = []
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=tasks.__getitem__):
                exc = task.exception()
                if isinstance(exc, RunStopped):
                    raise exc
                if exc is None:
                    run: SubgraphResult = task.result()
                    return _result({"winner": tasks[task], "output": run.output}, [run])
                errors.append(f"branch {tasks[task]}: {exc}")
        raise NodeFailure("every branch failed: " + "; ".join(errors), code="all_branches_failed")
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _result(output: dict[str, Any], runs: list[SubgraphResult]) -> NodeResult:
    usage = Usage()
    for run in runs:
        usage.add(run.usage)
    return NodeResult(output, sum(run.cost_usd for run in runs), usage)


PARALLEL_NODE = NodeType(name="parallel", execute=execute_parallel, effects=PURE,  # its branches: their own nodes
                         model=ParallelNode, placement="workflow")
