"""The Temporal workflows: a run (workflow id = run id), a nested workflow inside one, and a network (workflow
id = network id) whose runs are child workflows. Their code runs in Temporal's sandbox and drives the same runner
and pure scheduler as the embedded engine (see planning.py and networks.py)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from ice_mcp.core.context import RunContext, Spend
    from ice_mcp.engines.temporal.networks import NetworkRun
    from ice_mcp.engines.temporal.planning import (
        LOCAL_TIMEOUT,
        CallerSpend,
        EventSink,
        WorkflowRunner,
        workflow_now,
    )
    from ice_mcp.engines.temporal.wire import (
        ANSWER_SIGNAL,
        LOAD_JOURNAL,
        NESTED_EVENTS_SIGNAL,
        NESTED_WORKFLOW,
        NETWORK_WORKFLOW,
        RUN_WORKFLOW,
        SAVE_RECORD,
        NestedDone,
        NestedStart,
        NetworkStart,
        RecordSave,
        RunStart,
    )
    from ice_mcp.errors import IceError, NodeFailure, RunStopped
    from ice_mcp.store.events import EventLog
    from ice_mcp.store.journal import Replay, replay_from_events
    from ice_mcp.store.records import RunRecord


@workflow.defn(name=RUN_WORKFLOW)
class RunWorkflow:
    """One run: its record and journal end up in the shared store, as an embedded run's do."""

    def __init__(self) -> None:
        self.sink: EventSink | None = None
        self.early: list[list[dict[str, Any]]] = []
        self.asking: tuple[WorkflowRunner, EventLog] | None = None

    @workflow.signal(name=ANSWER_SIGNAL)
    def answer(self, data: dict[str, Any]) -> None:
        """A person's answer to a `human` node of this run (or of a nested workflow of it)."""
        if self.asking is not None:
            self.asking[0].take_answer(data, self.asking[1])

    @workflow.signal(name=NESTED_EVENTS_SIGNAL)
    def nested_events(self, events: list[dict[str, Any]]) -> None:
        """Events of a nested workflow of this run, numbered here in the order they arrive."""
        if self.sink is None:
            self.early.append(events)
            return
        for event in events:
            self.sink.add(event)

    @workflow.run
    async def run(self, start: RunStart) -> dict[str, Any]:
        sink = self.sink = EventSink(start.run_id, start.next_seq)
        for batch in self.early:
            self.nested_events(batch)
        sink.start()
        record = RunRecord.from_dict(start.record)
        sink.traceparent = record.traceparent
        caller = CallerSpend(start.caller, start.caller_budget_usd, start.caller_spent_usd)
        runner = WorkflowRunner(start.run_id, start.workflows, caller, start.tuning, sink)
        try:
            plan = runner.plans.plan(start.blueprint)
        except IceError as exc:  # the server validated it; a worker that cannot compile it ends the run readably
            record.status, record.error = "failed", {**exc.as_dict(), "code": "engine_error"}
            return await self._finish(sink, record)
        journal = list(start.replay)
        if start.resume:
            journal += await workflow.execute_local_activity(LOAD_JOURNAL, start.run_id, result_type=list[dict[str, Any]],
                                                             start_to_close_timeout=LOCAL_TIMEOUT)
        parent = Spend(budget_usd=start.budget_left_usd, parent=caller)
        events = EventLog(start.run_id, [sink], clock=workflow_now)
        self.asking = runner, events
        runner.questions.restore(start.run_id, journal)  # asked before it continued as new: the first deadline
        replay = replay_from_events(journal) if journal else None
        if record.retry_of and not start.resume:
            # A retry: the reused nodes are another run's, so this run journals them too (it can resume, and
            # be retried, without running them again), and it starts (run_started, retry_of) rather than resumes.
            replay = dataclasses.replace(replay or Replay(), reused_from=record.retry_of)
        ctx = RunContext(start.run_id, runner.plans.services, events, Spend(budget_usd=plan.blueprint.budget_usd, parent=parent),
                         runner, runner.catalogue, sleep=asyncio.sleep, globals=dict(start.globals), replay=replay,
                         questions=runner.questions, trace_parent=record.traceparent)
        execution = asyncio.create_task(runner.execute(plan, record, ctx))
        try:
            await workflow.wait_condition(lambda: execution.done() or runner.drained)
        except asyncio.CancelledError:  # cancelled from MCP: the runner stops its nodes and ends the record
            execution.cancel()
            await asyncio.wait({execution})
        if not execution.done():  # a long history: go on as a new execution that replays the journal
            await sink.close()
            workflow.continue_as_new(dataclasses.replace(
                start, caller_spent_usd=caller.cost_usd, resume=True, next_seq=sink.next_seq))
        return await self._finish(sink, execution.result())

    async def _finish(self, sink: EventSink, record: RunRecord) -> dict[str, Any]:
        await sink.close()
        document = record.to_dict()
        await workflow.execute_local_activity(SAVE_RECORD, RecordSave(record.run_id, document),
                                              start_to_close_timeout=LOCAL_TIMEOUT)
        return document


@workflow.defn(name=NESTED_WORKFLOW)
class NestedWorkflow:
    """A registered workflow run inside a run (a `workflow` node, a recursive flow's step)."""

    def __init__(self) -> None:
        self.asking: tuple[WorkflowRunner, EventLog] | None = None

    @workflow.signal(name=ANSWER_SIGNAL)
    def answer(self, data: dict[str, Any]) -> None:
        """An answer to a `human` node of this nested workflow, sent on by the workflow that started it."""
        if self.asking is not None:
            self.asking[0].take_answer(data, self.asking[1])

    @workflow.run
    async def run(self, start: NestedStart) -> NestedDone:
        sink = EventSink(start.run_id, nested=True)
        sink.start()
        caller = CallerSpend(start.caller, start.caller_budget_usd, start.caller_spent_usd)
        runner = WorkflowRunner(start.run_id, start.workflows, caller, start.tuning, sink)
        events = EventLog(start.run_id, [sink], clock=workflow_now)
        self.asking = runner, events
        ctx = RunContext(start.run_id, runner.plans.services, events, Spend(budget_usd=start.budget_left_usd, parent=caller),
                         runner, runner.catalogue, sleep=asyncio.sleep, depth=start.depth, path=start.path,
                         globals=dict(start.globals), trigger=dict(start.trigger), questions=runner.questions,
                         trace_parent=start.trace_parent)
        try:
            plan = runner.plans.plan(start.blueprint)
            result = await runner.run_nested(plan, start.inputs, ctx)
        except RunStopped as stop:
            raise ApplicationError(stop.message, stop.as_dict(), [], type="run_stopped", non_retryable=True) from None
        except NodeFailure as failure:
            error = {**failure.as_dict(), "retryable": failure.retryable}
            raise ApplicationError(failure.message, error, [], type=failure.code, non_retryable=True) from None
        except IceError as exc:
            raise ApplicationError(exc.message, exc.as_dict(), [], type=exc.code, non_retryable=True) from None
        finally:
            await sink.close()
        return NestedDone(result.output, result.cost_usd, result.usage.as_dict(), caller.cost_usd)


@workflow.defn(name=NETWORK_WORKFLOW)
class NetworkWorkflow:
    """A network: its workflows' runs are child workflows, so it needs no server to go on (see networks.py)."""

    @workflow.run
    async def run(self, start: NetworkStart) -> dict[str, Any]:
        return await NetworkRun(start).run()
