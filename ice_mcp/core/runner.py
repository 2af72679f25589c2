"""Runs a plan on asyncio: asks the scheduler what to start, runs nodes, feeds results back.

The runner owns time (timeouts, backoff, durations) and tasks (start, cancel,
await); the scheduler owns every decision about what runs next.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from ice_mcp.core.context import GraphRunner, RunContext, Spend, SubgraphResult
from ice_mcp.core.executor import NodeCall
from ice_mcp.core.plan import Graph, Plan, PlanNode
from ice_mcp.core.scheduler import NodeState, Scheduler
from ice_mcp.core.templates import Scope
from ice_mcp.errors import GraphFailed, IceError, NodeFailure, RunStopped
from ice_mcp.observability.tracing import node_attempt, node_span_id, parent_span_of, traceparent_of
from ice_mcp.store.journal import NodeOutcome
from ice_mcp.store.records import NodeRecord, RunRecord
from ice_mcp.store.vocabulary import EventType
from ice_mcp.types import NodeResult, Usage


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
    if isinstance(exc, IceError):  # keeps its code; retried only when it says another attempt may help
        return NodeFailure(exc.message, code=exc.code, retryable=bool(getattr(exc, "retryable", False)),
                           details=exc.details)
    return NodeFailure(f"{type(exc).__name__}: {exc}", code="node_error", details={"type": type(exc).__name__})


class Runner(GraphRunner):
    """`now` (wall clock, s) and `perf` (a monotonic clock, s) are a durable engine's deterministic clocks
    inside a workflow; in-process they are the system's."""

    emits_spans = True  # a Temporal workflow (replayed) passes trace context on to activities, never emits

    def __init__(self, now: Callable[[], float] = time.time, perf: Callable[[], float] = time.perf_counter) -> None:
        self.now, self.perf = now, perf

    async def execute(self, plan: Plan, record: RunRecord, ctx: RunContext) -> RunRecord:
        """Run a whole plan; fills and returns `record`, whatever happens."""
        record.started_at = record.started_at or self.now()
        started = self.perf()
        if ctx.replay is None or ctx.replay.reused_from:
            ctx.emit(EventType.RUN_STARTED, workflow=plan.name,
                     **({"retry_of": ctx.replay.reused_from} if ctx.replay is not None else {}))
        else:
            ctx.emit(EventType.RUN_RESUMED, workflow=plan.name, finished_nodes=len(ctx.replay.outcomes))
        if record.trigger is not None:
            ctx = replace(ctx, trigger=record.trigger)
        scope = Scope({"inputs": record.inputs, "global": ctx.globals, "trigger": ctx.trigger})
        try:
            if plan.blueprint.timeout_seconds is None:
                result = await self.run_graph(plan.graph, scope, ctx, records=record.nodes)
            else:
                async with asyncio.timeout(plan.blueprint.timeout_seconds):
                    result = await self.run_graph(plan.graph, scope, ctx, records=record.nodes)
            record.outputs = self._outputs(plan, scope, result)
            record.status = "succeeded"
        except GraphFailed as exc:
            # A model call refused for lack of budget ends the run as over budget, not as a failure.
            cause = exc.details.get("cause") or {}
            record.status = "over_budget" if cause.get("code") == "over_budget" else "failed"
            record.error = exc.as_dict()
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
            record.finished_at = self.now()
            record.duration_ms = ((self.perf() - started) * 1000 if ctx.replay is None
                                  else (record.finished_at - record.started_at) * 1000)
            ctx.emit(EventType.RUN_FINISHED, status=record.status, error=record.error)
        return record

    def _outputs(self, plan: Plan, scope: Scope, result: SubgraphResult) -> dict[str, Any]:
        if plan.outputs is None:
            return {sink: result.outputs.get(sink) for sink in plan.graph.sinks}
        rendered = plan.outputs.render(scope.child(result.outputs))
        return rendered if isinstance(rendered, dict) else {"result": rendered}

    async def run_workflow(self, plan: Plan, inputs: dict[str, Any], ctx: RunContext) -> SubgraphResult:
        inputs, problems = plan.prepare_inputs(inputs)
        if problems:
            raise NodeFailure(f"invalid inputs for workflow {plan.name!r}: {problems[0]['path']}: {problems[0]['message']}",
                              code="invalid_inputs", retryable=False, details={"errors": problems})
        scope = Scope({"inputs": inputs, "global": ctx.globals, "trigger": ctx.trigger})
        # The sub-workflow's own budget and timeout hold inside the calling run too.
        own = Spend(budget_usd=plan.blueprint.budget_usd, parent=ctx.spend)
        try:
            async with asyncio.timeout(plan.blueprint.timeout_seconds):
                result = await self.run_graph(plan.graph, scope, replace(ctx, spend=own))
        except RunStopped as stop:
            if stop.spend is not own:
                raise
            raise NodeFailure(f"workflow {plan.name!r}: {stop.message}", code="over_budget", retryable=False) from None
        except TimeoutError:
            raise NodeFailure(f"workflow {plan.name!r} exceeded {plan.blueprint.timeout_seconds} s",
                              code="timeout") from None
        result.output = self._outputs(plan, scope, result)
        return result

    async def run_graph(self, graph: Graph, scope: Scope, ctx: RunContext,
                        records: dict[str, NodeRecord] | None = None) -> SubgraphResult:
        return await _GraphRun(self, graph, scope, ctx, records).run()

    async def run_node(self, node: PlanNode, scope: Scope, ctx: RunContext, record: NodeRecord) -> NodeResult:
        """All attempts of one node: retries with backoff, a timeout per attempt."""
        spec = node.spec
        attempt = 0
        if ctx.replay is not None:
            # Resumed: the node in flight goes on at the attempt it had reached (same idempotency key);
            # only containers replay what is inside them (an agent's calls are not deterministic).
            attempt = ctx.replay.attempts.get(ctx.path + node.id, 1) - 1
            if not node.is_container:
                ctx = replace(ctx, replay=None)
        ctx.emit(EventType.NODE_STARTED, node.id, attempt + 1)
        while True:
            attempt += 1
            record.attempts = attempt
            call = NodeCall(node, scope, ctx, attempt)
            try:
                if ctx.trace_parent is not None:
                    return await self._traced(call)
                timeout = node.attempt_timeout
                work = node.execute(call)
                return await (work if timeout is None else timed_attempt(work, timeout))
            except (RunStopped, asyncio.CancelledError):
                raise
            except Exception as exc:
                failure = failure_of(exc)
            if not failure.retryable or attempt > spec.retries:
                raise failure
            delay = backoff_delay(spec.backoff, spec.backoff_seconds, attempt)
            ctx.emit(EventType.NODE_RETRYING, node.id, attempt, error=failure.as_dict(), delay_seconds=delay)
            await ctx.sleep(delay)


    def _traced(self, call: NodeCall) -> Awaitable[NodeResult]:
        """One attempt, its timeout included, in its span; a container's nodes hang under it. A span id comes
        from the span it hangs under, the node path and the attempt, so an attempt run again after a crash
        keeps its span's id and each attempt of a container gives its nodes ids of their own."""
        ctx, node = call.ctx, call.node
        assert ctx.trace_parent is not None
        span_id = node_span_id(parent_span_of(ctx.trace_parent), ctx.path + node.id, call.attempt)
        if node.is_container:
            call = NodeCall(node, call.scope, replace(ctx, trace_parent=traceparent_of(ctx.trace_parent, span_id)),
                            call.attempt)
        work = node.execute(call)
        if node.attempt_timeout is not None:  # inside the span: a span that timed out says so
            work = timed_attempt(work, node.attempt_timeout)
        if not self.emits_spans:
            return work
        return node_attempt(work, ctx.trace_parent, span_id, ctx.path + node.id, node.spec.type, call.attempt,
                            getattr(node.spec, "tool_name", None))


def attempt_timed_out(seconds: float | None) -> NodeFailure:
    """An attempt that outlived the node's `timeout_seconds` (retried as the node's `retries` allow)."""
    return NodeFailure(f"attempt timed out after {seconds} s", code="timeout")


async def timed_attempt(attempt: Awaitable[NodeResult], seconds: float | None) -> NodeResult:
    """One attempt within `seconds` (None: no limit); its own deadline passing is a `timeout` failure, while a
    TimeoutError the node raised itself stays that node's error."""
    if seconds is None:
        return await attempt
    try:
        async with asyncio.timeout(seconds) as deadline:
            return await attempt
    except TimeoutError:
        if deadline.expired():
            raise attempt_timed_out(seconds) from None
        raise


class _GraphRun:
    """One execution of one graph. A finishing node settles itself and starts what became ready,
    in the same event-loop step; the driver only waits for the end."""

    def __init__(self, runner: Runner, graph: Graph, scope: Scope, ctx: RunContext,
                 records: dict[str, NodeRecord] | None) -> None:
        self.runner, self.graph, self.ctx = runner, graph, ctx
        self.level = scope.child()
        self.outputs = self.level.vars
        self.records = records if records is not None else {}
        for node_id in graph.nodes:
            self.records[node_id] = NodeRecord()
        self.scheduler = Scheduler(graph.shape, graph.max_parallel)
        self.running: dict[str, asyncio.Task[None]] = {}
        self.loop = asyncio.get_running_loop()
        self.finished: asyncio.Future[None] = self.loop.create_future()
        self.stop_reason: BaseException | None = None
        self.replay = ctx.replay.outcomes if ctx.replay else None
        self.reused_from = ctx.replay.reused_from if ctx.replay else None
        self.driver: asyncio.Task[Any] | None = None

    async def run(self) -> SubgraphResult:
        self.driver = asyncio.current_task()
        try:
            self._skip(self.scheduler.initial_skips())
            # A lone first node runs in this task (one-node graphs and chains need no task to start);
            # what it makes ready gets tasks of its own, so this task stays free to stop them.
            first = self._start_ready(continue_with_one=True, only_if_alone=True)
            if first is not None:
                await self._run_one(first, carry=False)
            if not self.scheduler.finished:
                await self.finished
        finally:
            await self._cancel_running()
        if self.stop_reason is not None:
            raise self.stop_reason
        if self.scheduler.failed_node is not None:
            raise GraphFailed(self.scheduler.failed_node, self.records[self.scheduler.failed_node].error or {})
        graph, outputs = self.graph, self.outputs
        output = graph.output.render(self.level) if graph.output is not None else graph.sink_output(outputs)
        cost: float = 0  # summed in one pass, in the records' order (as sum() and Usage.add did)
        input_tokens = output_tokens = 0
        for record in self.records.values():
            cost += record.cost_usd
            input_tokens += record.usage.input_tokens
            output_tokens += record.usage.output_tokens
        return SubgraphResult(output, dict(outputs), self.records, cost, Usage(input_tokens, output_tokens))

    def _start_ready(self, continue_with_one: bool = False, only_if_alone: bool = False) -> str | None:
        """Start what is ready. The calling node task may carry on with one of them itself,
        which saves a task and a loop turn per node on chains."""
        carried = None
        ready = self.scheduler.take_ready()
        if only_if_alone and len(ready) != 1:
            continue_with_one = False
        while ready:
            replayed = False
            for node_id in ready:
                outcome = self.replay.get(self.ctx.path + node_id) if self.replay is not None else None
                if outcome is not None and outcome.status != "skipped":  # skips follow from the replayed results
                    self._settle_replayed(node_id, outcome)
                    replayed = True
                    continue
                self.records[node_id].status = "running"
                if continue_with_one and carried is None:
                    carried = node_id
                    self.running[node_id] = asyncio.current_task(self.loop)  # type: ignore[assignment]
                else:
                    self.running[node_id] = self.loop.create_task(self._node(node_id))
            ready = self.scheduler.take_ready() if replayed and not self.scheduler.stopped else []
        if self.scheduler.finished and not self.finished.done():
            self.finished.set_result(None)
        return carried

    async def _node(self, node_id: str) -> None:
        carried: str | None = node_id
        streak = 0
        while carried is not None:
            carried = await self._run_one(carried)
            streak += 1
            if carried is not None and streak % 32 == 0:
                await asyncio.sleep(0)  # let other tasks run during long chains

    async def _run_one(self, node_id: str, carry: bool = True) -> str | None:
        """Run and settle one node; returns the next node this task carries on with, if any."""
        node, record = self.graph.nodes[node_id], self.records[node_id]
        started = self.runner.perf()
        try:
            result = await self.runner.run_node(node, self.level, self.ctx, record)
        except asyncio.CancelledError as exc:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                if task is not self.driver:  # the driver's own node is marked cancelled with the rest
                    self.running.pop(node_id, None)
                raise
            outcome: NodeResult | BaseException = NodeFailure(  # the node raised it itself; we were not cancelled
                f"the node raised CancelledError: {exc}", code="cancelled_by_node", retryable=False)
        except BaseException as exc:
            outcome = exc
        else:
            outcome = result
        self.running.pop(node_id, None)
        record.duration_ms = (self.runner.perf() - started) * 1000
        try:
            if isinstance(outcome, NodeResult):
                self._settle_success(node_id, outcome)
            else:
                self._settle_failure(node_id, outcome)
            if self.stop_reason is None:
                return self._start_ready(continue_with_one=carry)
        except Exception as exc:  # an engine bug ends the graph with a readable error, never a hang
            self._stop(exc)
        return None

    def _settle_replayed(self, node_id: str, outcome: NodeOutcome) -> None:
        """A node the journal says finished: its recorded result, without running it again."""
        record = self.records[node_id]
        record.attempts, record.duration_ms = outcome.attempts, outcome.duration_ms
        if outcome.status == "succeeded":
            self._settle_success(node_id, NodeResult(outcome.output, outcome.cost_usd, outcome.usage), replayed=True)
        else:
            error = outcome.error or {}
            self._settle_failure(node_id, NodeFailure(str(error.get("message", "")), code=str(error.get("code", "")),
                                                      details=error.get("details")), replayed=True)

    def _settle_success(self, node_id: str, result: NodeResult, replayed: bool = False) -> None:
        node, record, ctx = self.graph.nodes[node_id], self.records[node_id], self.ctx
        node_type, usage = node.spec.type, result.usage
        record.status, record.output = "succeeded", result.output
        record.cost_usd, record.usage = result.cost_usd, usage
        self.outputs[node_id] = result.output
        tokens = usage.total
        # The journal entry that feeds a later replay, written before the scheduler hears; a retry
        # journals what it reuses too, so the retry itself can resume.
        if not replayed or self.reused_from:
            ctx.emit(EventType.NODE_SUCCEEDED, node_id, record.attempts, type=node_type,
                     duration_ms=record.duration_ms, cost_usd=result.cost_usd, tokens=tokens, usage=usage.as_dict(),
                     output=result.output, **({"reused_from": self.reused_from} if replayed else {}))
        branch = bool(result.output.get("result")) if node_type == "condition" else None
        skipped = self.scheduler.succeeded(node_id, branch)
        if skipped:
            self._skip(skipped)
        if (result.cost_usd or tokens) and not node.is_container:
            try:
                ctx.spend.charge(result.cost_usd, result.usage)
            except RunStopped as stop:
                self._stop(stop)

    def _settle_failure(self, node_id: str, exc: BaseException, replayed: bool = False) -> None:
        node, record = self.graph.nodes[node_id], self.records[node_id]
        if isinstance(exc, RunStopped):
            record.status = "cancelled"
            self.scheduler.cancelled(node_id)
            self._stop(exc)
            return
        failure = failure_of(exc)
        record.status, record.error = "failed", failure.as_dict()
        spent = failure.details.get("cost_usd")
        if isinstance(spent, int | float) and spent > 0 and not node.is_container:
            record.cost_usd = float(spent)  # a failed LLM call was still paid for
            try:
                self.ctx.spend.charge(record.cost_usd, record.usage)
            except RunStopped as stop:
                self._stop(stop)
        if not replayed:
            self.ctx.emit(EventType.NODE_FAILED, node_id, record.attempts, type=node.type,
                          duration_ms=record.duration_ms, error=record.error, cost_usd=record.cost_usd)
        if node.spec.on_error == "continue":
            record.output = self.outputs[node_id] = {"error": record.error}
        self._skip(self.scheduler.failed(node_id))
        if self.scheduler.stopped and not self.finished.done():
            self.finished.set_result(None)

    def _stop(self, reason: BaseException) -> None:
        self.stop_reason = self.stop_reason or reason
        self.scheduler.stopped = True
        if not self.finished.done():
            self.finished.set_result(None)

    def _skip(self, node_ids: list[str]) -> None:
        for node_id in node_ids:
            self.outputs[node_id] = None
            self.records[node_id].status = "skipped"
            if self.replay is None or self.ctx.path + node_id not in self.replay:
                self.ctx.emit(EventType.NODE_SKIPPED, node_id)

    async def _cancel_running(self) -> None:
        for node_id in self.scheduler.stop():
            self.records[node_id].status = "cancelled"
        tasks = dict(self.running)
        if not tasks:
            return
        others = [task for task in tasks.values() if task is not self.driver]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        for node_id in tasks:
            if self.scheduler.states[node_id] is not NodeState.RUNNING:
                continue  # it settled while being cancelled: its result came first
            self.records[node_id].status = "cancelled"
            self.scheduler.cancelled(node_id)
            self.ctx.emit(EventType.NODE_CANCELLED, node_id, self.records[node_id].attempts)
