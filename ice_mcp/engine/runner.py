"""Runs a plan on asyncio: asks the scheduler what to start, runs nodes, feeds results back.

The runner owns time (timeouts, backoff, durations) and tasks (start, cancel,
await); the scheduler owns every decision about what runs next.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from ice_mcp.engine.context import GraphRunner, RunContext, RunStopped, SubgraphResult
from ice_mcp.engine.plan import Graph, Plan, PlanNode
from ice_mcp.engine.records import NodeRecord, RunRecord
from ice_mcp.engine.scheduler import Scheduler
from ice_mcp.engine.templates import Scope
from ice_mcp.nodes.base import NodeCall, NodeFailure, NodeResult, Usage


class GraphFailed(NodeFailure):
    """A node failed with `on_error: fail`: the graph stopped. Names the node."""

    def __init__(self, node_id: str, error: dict[str, Any]) -> None:
        super().__init__(f"node {node_id!r} failed: {error.get('message', '')}", code="node_failed",
                         retryable=False, details={"node_id": node_id, "error": error})
        self.node_id = node_id
        self.error = error


def backoff_delay(kind: str, first: float, attempt: int) -> float:
    """Delay before retry number `attempt` (1 = the first retry)."""
    if kind == "fixed":
        return first
    if kind == "linear":
        return first * attempt
    return float(first * 2 ** (attempt - 1))


def failure_of(exc: BaseException) -> NodeFailure:
    """Any exception from a node, as a NodeFailure the user can read (never a traceback)."""
    if isinstance(exc, NodeFailure):
        return exc
    return NodeFailure(f"{type(exc).__name__}: {exc}", code="node_error", details={"type": type(exc).__name__})


class Runner(GraphRunner):
    async def execute(self, plan: Plan, record: RunRecord, ctx: RunContext) -> RunRecord:
        """Run a whole plan; fills and returns `record`, whatever happens."""
        record.started_at = time.time()
        started = time.perf_counter()
        ctx.emit("run_started", workflow=plan.name)
        scope = Scope({"inputs": record.inputs, "global": ctx.globals})
        try:
            async with asyncio.timeout(plan.blueprint.timeout_seconds):
                result = await self.run_graph(plan.graph, scope, ctx, records=record.nodes)
            record.outputs = self._outputs(plan, scope, result)
            record.status = "succeeded"
        except GraphFailed as exc:
            record.status, record.error = "failed", exc.as_dict()
        except RunStopped as exc:
            record.status, record.error = exc.status, {"code": exc.status, "message": exc.message}
        except TimeoutError:
            record.status = "timed_out"
            record.error = {"code": "timed_out", "message": f"run exceeded {plan.blueprint.timeout_seconds} s"}
        except NodeFailure as exc:  # outputs that fail to render
            record.status, record.error = "failed", exc.as_dict()
        except asyncio.CancelledError:
            record.status, record.error = "cancelled", {"code": "cancelled", "message": "the run was cancelled"}
        except Exception as exc:  # an engine bug must still end the run with a readable record
            record.status = "failed"
            record.error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
        finally:
            record.cost_usd, record.usage = ctx.spend.cost_usd, ctx.spend.usage
            record.finished_at = time.time()
            record.duration_ms = (time.perf_counter() - started) * 1000
            ctx.emit("run_finished", status=record.status, error=record.error)
        return record

    def _outputs(self, plan: Plan, scope: Scope, result: SubgraphResult) -> dict[str, Any]:
        if plan.outputs is None:
            return {sink: result.outputs.get(sink) for sink in plan.graph.sinks}
        rendered = plan.outputs.render(scope.child(result.outputs))
        return rendered if isinstance(rendered, dict) else {"result": rendered}

    async def run_workflow(self, plan: Plan, inputs: dict[str, Any], ctx: RunContext) -> SubgraphResult:
        errors = sorted(plan.inputs_validator.iter_errors(inputs), key=lambda e: list(e.path))
        if errors:
            raise NodeFailure(f"invalid inputs for workflow {plan.name!r}: {errors[0].message}",
                              code="invalid_inputs", retryable=False)
        scope = Scope({"inputs": inputs, "global": ctx.globals})
        result = await self.run_graph(plan.graph, scope, ctx)
        result.output = self._outputs(plan, scope, result)
        return result

    async def run_graph(self, graph: Graph, scope: Scope, ctx: RunContext,
                        records: dict[str, NodeRecord] | None = None) -> SubgraphResult:
        level = scope.child()
        outputs = level.vars
        records = records if records is not None else {}
        for node_id in graph.nodes:
            records[node_id] = NodeRecord()
        scheduler = Scheduler(graph.shape, graph.max_parallel)
        running: dict[asyncio.Task[NodeResult], str] = {}
        started: dict[str, float] = {}
        finished: deque[asyncio.Task[NodeResult]] = deque()
        loop = asyncio.get_running_loop()
        wakeup: asyncio.Future[None] | None = None

        def on_done(task: asyncio.Task[NodeResult]) -> None:
            finished.append(task)
            if wakeup is not None and not wakeup.done():
                wakeup.set_result(None)

        def skip(node_ids: list[str]) -> None:
            for node_id in node_ids:
                outputs[node_id] = None
                records[node_id].status = "skipped"
                ctx.emit("node_skipped", node_id)

        skip(scheduler.initial_skips())
        try:
            while True:
                for node_id in scheduler.take_ready():
                    records[node_id].status = "running"
                    started[node_id] = time.perf_counter()
                    task = loop.create_task(self._run_node(graph.nodes[node_id], level, ctx, records[node_id]))
                    task.add_done_callback(on_done)
                    running[task] = node_id
                if not running:
                    break
                if not finished:
                    wakeup = loop.create_future()
                    await wakeup
                    wakeup = None
                while finished:
                    task = finished.popleft()
                    node_id = running.pop(task)
                    record = records[node_id]
                    record.duration_ms = (time.perf_counter() - started[node_id]) * 1000
                    node = graph.nodes[node_id]
                    exc = task.exception()
                    if exc is None:
                        result = task.result()
                        record.status, record.output = "succeeded", result.output
                        record.cost_usd, record.usage = result.cost_usd, result.usage
                        outputs[node_id] = result.output
                        ctx.emit("node_succeeded", node_id, record.attempts, type=node.type,
                                 duration_ms=record.duration_ms, cost_usd=result.cost_usd,
                                 tokens=result.usage.total)
                        if not node.is_container and (result.cost_usd or result.usage.total):
                            ctx.spend.charge(result.cost_usd, result.usage)
                        branch = bool(result.output.get("result")) if node.type == "condition" else None
                        skip(scheduler.succeeded(node_id, branch))
                    elif isinstance(exc, RunStopped):
                        record.status = "cancelled"
                        scheduler.cancelled(node_id)
                        raise exc
                    else:
                        failure = failure_of(exc)
                        record.status, record.error = "failed", failure.as_dict()
                        ctx.emit("node_failed", node_id, record.attempts, type=node.type,
                                 duration_ms=record.duration_ms, error=record.error)
                        if node.spec.on_error == "continue":
                            record.output = outputs[node_id] = {"error": record.error}
                        skip(scheduler.failed(node_id))
                if scheduler.stopped:
                    break
        finally:
            for node_id in scheduler.stop():
                records[node_id].status = "cancelled"
            if running:
                for task in running:
                    task.cancel()
                await asyncio.gather(*running, return_exceptions=True)
                for task, node_id in running.items():
                    records[node_id].status = "cancelled"
                    ctx.emit("node_cancelled", node_id, records[node_id].attempts)
        if scheduler.failed_node is not None:
            raise GraphFailed(scheduler.failed_node, records[scheduler.failed_node].error or {})
        output = graph.output.render(level) if graph.output is not None else graph.sink_output(outputs)
        usage = Usage()
        for record in records.values():
            usage.add(record.usage)
        return SubgraphResult(output, dict(outputs), records, sum(r.cost_usd for r in records.values()), usage)

    async def _run_node(self, node: PlanNode, scope: Scope, ctx: RunContext, record: NodeRecord) -> NodeResult:
        spec = node.spec
        ctx.emit("node_started", node.id, 1)
        attempt = 0
        while True:
            attempt += 1
            record.attempts = attempt
            call = NodeCall(node, scope, ctx, attempt)
            try:
                if spec.timeout_seconds is None:
                    return await node.execute(call)
                async with asyncio.timeout(spec.timeout_seconds) as deadline:
                    return await node.execute(call)
            except (RunStopped, asyncio.CancelledError):
                raise
            except TimeoutError as exc:
                expired = spec.timeout_seconds is not None and deadline.expired()
                failure = (NodeFailure(f"attempt timed out after {spec.timeout_seconds} s", code="timeout")
                           if expired else failure_of(exc))
            except Exception as exc:
                failure = failure_of(exc)
            if not failure.retryable or attempt > spec.retries:
                raise failure
            delay = backoff_delay(spec.backoff, spec.backoff_seconds, attempt)
            ctx.emit("node_retrying", node.id, attempt, error=failure.as_dict(), delay_seconds=delay)
            await ctx.sleep(delay)
