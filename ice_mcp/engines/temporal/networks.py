"""A network inside its Temporal workflow (id = network id): the network's graph, run by the same runner and
scheduler as on the embedded engine; each workflow begun by a local activity (checked, admitted and kept as a
run, as `Orchestrator.start` does) and run as a child workflow (id = its run id); the network's record kept in
the store as it changes.

Imported by the sandboxed workflow module as a pass-through module: deterministic, its I/O in activities."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from temporalio import workflow
from temporalio.exceptions import CancelledError, ChildWorkflowError, WorkflowAlreadyStartedError

from ice_mcp.blueprint.models import NetworkManifest
from ice_mcp.core.context import RunContext, Spend
from ice_mcp.core.executor import NodeCall
from ice_mcp.core.networks import keep_network, member_ended, network_graph, network_status
from ice_mcp.core.plan import Plan
from ice_mcp.core.runner import Runner
from ice_mcp.core.templates import Scope
from ice_mcp.engines.temporal.planning import (
    LOCAL_TIMEOUT,
    WORKFLOW_SERVICES,
    CallerSpend,
    WorkflowPump,
    workflow_now,
)
from ice_mcp.engines.temporal.wire import (
    RUN_WORKFLOW,
    SAVE_RECORD,
    START_MEMBER,
    MemberStart,
    MemberStarted,
    NetworkStart,
    RecordSave,
    RunStart,
)
from ice_mcp.errors import NodeFailure, RunStopped, UnknownName
from ice_mcp.store.events import EventLog
from ice_mcp.store.records import RunRecord
from ice_mcp.types import NodeResult


class NetworkGraphRunner(Runner):
    """The runner of a network's graph in its workflow: Temporal's clocks; spans are the runs' own."""

    emits_spans = False


class RecordKeeper(WorkflowPump):
    """The network's record in the store: one local activity at a time saves it as it stands then, so the last
    save is the latest state."""

    def __init__(self, record: RunRecord) -> None:
        super().__init__()
        self.record = record
        self._dirty = False

    def changed(self) -> None:
        self._dirty = True
        self.start()

    def _queued(self) -> bool:
        return self._dirty

    async def _send(self) -> None:
        self._dirty = False
        await save_record(self.record)


async def save_record(record: RunRecord) -> None:
    await workflow.execute_local_activity(SAVE_RECORD, RecordSave(record.run_id, record.to_dict()),
                                          start_to_close_timeout=LOCAL_TIMEOUT)


class NetworkRun:
    """One network's execution: the state of each of its workflows (as `NetworkHandle.workflows`), its spend
    against its budget and its caller's, and its record."""

    def __init__(self, start: NetworkStart) -> None:
        self.start = start
        self.manifest = NetworkManifest.model_validate(start.manifest)
        self.record = RunRecord.from_dict(start.record)
        self.keeper = RecordKeeper(self.record)
        self.workflows: dict[str, dict[str, Any]] = {
            w.id: {"status": "skipped", "run_id": None, "outputs": None, "error": None} for w in self.manifest.workflows}
        self.caller = CallerSpend(start.caller, start.caller_budget_usd, start.caller_spent_usd)
        self.spend = Spend(budget_usd=self.manifest.budget_usd, parent=self.caller)
        self.main: asyncio.Task[Any] | None = None  # the workflow's task: Temporal cancels it to cancel the network

    @property
    def cancelled(self) -> bool:
        """Whether the network was cancelled: Temporal cancels the workflow's task, and a child workflow waited
        on hides that cancellation from its waiter (it waits for the child's end, then returns it)."""
        return self.main is not None and self.main.cancelling() > 0

    async def run(self) -> dict[str, Any]:
        """Run the graph to its end (a cancellation included) and keep the network's final record."""
        start, manifest = self.start, self.manifest
        self.main = asyncio.current_task()
        runner = NetworkGraphRunner(now=workflow_now, perf=workflow.time)
        ctx = RunContext(start.network_id, WORKFLOW_SERVICES, EventLog(start.network_id, clock=workflow_now), Spend(), runner,
                         _no_workflows, sleep=asyncio.sleep, globals=dict(manifest.global_),
                         trigger=dict(start.trigger))
        stopped: str | None = None
        try:
            await runner.run_graph(network_graph(manifest, self.run_member),
                                   Scope({"global": manifest.global_, "trigger": start.trigger}), ctx)
        except RunStopped as exc:
            stopped = exc.status
        except asyncio.CancelledError:  # cancelled from MCP: its runs were cancelled with it
            stopped = "cancelled"
        if self.cancelled:
            stopped = "cancelled"
        self.keep(network_status(stopped, self.workflows))
        await self.keeper.close()
        return self.record.to_dict()

    def keep(self, status: str = "running") -> None:
        keep_network(self.record, self.workflows, status, self.spend.cost_usd, workflow_now())
        self.keeper.changed()

    def budget_left(self) -> float | None:
        """What the network's own budget leaves (its caller's is checked where it is kept)."""
        budget = self.spend.budget_usd
        return None if budget is None else budget - self.spend.cost_usd

    async def run_member(self, call: NodeCall) -> NodeResult:
        """One of the network's workflows: begun as a run (or refused, as `Orchestrator.start` refuses), then
        run as a child workflow; its end feeds the workflows after it, as on the embedded engine."""
        if self.cancelled:  # a workflow whose prerequisite ended as the network was cancelled never starts
            raise asyncio.CancelledError()
        workflow_id = call.node.id
        state = self.workflows[workflow_id]
        state["status"] = "running"
        self.keep()
        ask = MemberStart(self.start.network_id, workflow_id, self.start.members[workflow_id], call.render("inputs"),
                          self.record.trigger, self.caller.name, self.caller.budget_usd, self.budget_left())
        begun = asyncio.ensure_future(workflow.execute_local_activity(
            START_MEMBER, ask, result_type=MemberStarted, start_to_close_timeout=LOCAL_TIMEOUT))
        try:
            started = await asyncio.shield(begun)
        except asyncio.CancelledError:  # its run may be kept already: it ends cancelled, for no workflow runs it
            started = await begun
            if started.record is not None:
                await self._never_ran(RunRecord.from_dict(started.record))
            raise
        if started.error is not None:
            state.update(status="failed", error=started.error)
            self.keep()
            raise NodeFailure(str(started.error.get("message")), code=str(started.error.get("code")),
                              retryable=False, details=started.error.get("details"))
        assert started.run_id is not None and started.record is not None
        state["run_id"] = started.run_id
        self.keep()
        self.caller.observe(started.caller_spent_usd, 0.0)
        run = RunRecord.from_dict(started.record)
        try:
            if not run.done:  # (a run found done was begun and ended before: its end stands)
                run = await self._child(workflow_id, run, started)
        except asyncio.CancelledError:
            state["status"] = "cancelled"
            raise
        state.update(status=run.status, outputs=run.outputs, error=run.error)
        with contextlib.suppress(RunStopped):  # the network pays for its run (member_ended says if that stops it)
            self.spend.charge(run.cost_usd, run.usage)
        self.keep()
        return member_ended(workflow_id, run, self.spend)

    async def _child(self, workflow_id: str, run: RunRecord, started: MemberStarted) -> RunRecord:
        """The member's run as a child workflow (cancelled with the network, and when the network's workflow
        closes before it)."""
        start = self.start
        assert started.record is not None
        child = RunStart(run.run_id, start.members[workflow_id].blueprint, started.record, workflows=start.workflows,
                         globals=dict(self.manifest.global_), caller=self.caller.name,
                         caller_budget_usd=self.caller.budget_usd, caller_spent_usd=started.caller_spent_usd,
                         budget_left_usd=self.budget_left(), tuning=start.tuning)
        try:
            handle = await workflow.start_child_workflow(
                RUN_WORKFLOW, child, id=run.run_id, result_type=dict[str, Any],
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL)
        except asyncio.CancelledError:
            await self._never_ran(run)
            raise
        except WorkflowAlreadyStartedError as exc:  # not this network's child: it cannot wait for it
            run.status, run.error = "failed", {"code": "engine_error", "message": f"its workflow was taken: {exc}"}
            return run
        try:
            return RunRecord.from_dict(await handle)
        except ChildWorkflowError as exc:
            if isinstance(exc.cause, CancelledError):
                raise asyncio.CancelledError() from None
            run.status, run.error = "failed", {"code": "engine_error",
                                               "message": f"the run's Temporal workflow failed: {exc.cause}"}
            return run

    async def _never_ran(self, run: RunRecord) -> None:
        """A run kept but never started (the network was cancelled in between) ends cancelled."""
        if run.done:
            return
        run.status, run.finished_at = "cancelled", workflow_now()
        await save_record(run)


def _no_workflows(name: str) -> Plan:
    raise UnknownName("workflow", name)  # a network's nodes are its own workflows, never registered ones
