"""The activities a worker runs: one attempt of a node that does I/O (with the embedded engine's executors and
the call's idempotency key), and the local activities that keep a run's journal and record in the shared store
and begin a network's workflows as runs."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from ice_mcp.blueprint.issues import CostEstimate
from ice_mcp.core.blueprints import compile_plan
from ice_mcp.core.context import RunContext, Spend
from ice_mcp.core.executor import NodeCall, NodeType, node_models
from ice_mcp.core.plan import PlanNode
from ice_mcp.core.runner import failure_of, timed_attempt
from ice_mcp.core.templates import Constant, Scope
from ice_mcp.engines.remote_runs import follow_event
from ice_mcp.engines.temporal.planning import PLANS, PlanCache
from ice_mcp.engines.temporal.spans import trace_workflow_nodes
from ice_mcp.engines.temporal.wire import (
    LOAD_JOURNAL,
    NODE_ACTIVITY,
    SAVE_RECORD,
    START_MEMBER,
    WRITE_EVENTS,
    EventBatch,
    MemberStart,
    MemberStarted,
    NodeDone,
    NodeTask,
    RecordSave,
    temporal_owner,
)
from ice_mcp.errors import IceError, RunStopped
from ice_mcp.observability import tracing
from ice_mcp.store.base import RunStorage, dumps, loads
from ice_mcp.store.events import Event, EventLog
from ice_mcp.store.records import RunRecord
from ice_mcp.store.vocabulary import QUESTION_EVENTS

if TYPE_CHECKING:
    from ice_mcp.core.context import WorkflowPlans
    from ice_mcp.core.plan import Plan
    from ice_mcp.core.runner import Runner
    from ice_mcp.observability.metrics import PrometheusMetrics
    from ice_mcp.services import Services

def plain(value: Any) -> Any:
    """A node's output as JSON values (what the store would keep of it), for Temporal's JSON converter."""
    return loads(dumps(value))


@dataclass(slots=True)
class NodeActivities:
    """A worker's activities, wired to its orchestrator's services, node types and stores."""

    services: Services
    node_types: Mapping[str, NodeType]
    store: RunStorage  # journals, records and caller spend, shared with the MCP servers
    runner: Runner  # what an agent's workflow tools run on, inside the activity
    workflows: WorkflowPlans
    meter: PrometheusMetrics | None = None  # counts what the journal says, as it is written (once per event)
    new_run: Callable[..., RunRecord] | None = None  # Orchestrator.new_run: a network's workflow begun as a run
    plans: PlanCache = PLANS  # how this worker's workflows compile plans (its task queue's)

    def all(self) -> list[Any]:
        return [self.run_node, self.write_events, self.save_record, self.load_journal, self.start_member]

    @activity.defn(name=NODE_ACTIVITY)
    async def run_node(self, task: NodeTask) -> NodeDone:
        """One attempt of one node. Run again after a lost worker, it has the same attempt, hence the same
        idempotency key (`run_id/node_path/attempt`)."""
        spec = node_models(self.node_types.values()).node.validate_python(task.node)
        node_type = self.node_types.get(spec.type)
        if node_type is None:
            raise ApplicationError(f"this worker cannot run {spec.type!r} nodes",
                                   {"code": "unavailable_node_type", "message": f"no {spec.type!r} node type here"},
                                   [], type="unavailable_node_type", non_retryable=True)
        node = PlanNode(spec.id, spec, node_type.execute, (), {k: Constant(v) for k, v in task.rendered.items()})
        events = EventLog(task.run_id)
        budget = await asyncio.to_thread(self._budget_left, task)
        ctx = RunContext(task.run_id, self.services, events, Spend(budget_usd=budget), self.runner, self.workflows,
                         depth=task.depth, path=task.path, globals=dict(task.globals))
        beat = asyncio.create_task(_heartbeat(task.heartbeat_seconds / 3))
        # The timeout is counted in this activity: a run again after a lost worker has all of it again (a timer
        # in the workflow would have counted the lost worker's time too). Inside the span: a timeout says so.
        work = timed_attempt(node_type.execute(NodeCall(node, Scope(), ctx, task.attempt)), spec.timeout_seconds)
        if tracing.ENABLED and task.trace_parent is not None:  # run again after a lost worker: the same span id
            path = task.path + spec.id
            span_id = tracing.node_span_id(tracing.parent_span_of(task.trace_parent), path, task.attempt)
            work = tracing.node_attempt(work, task.trace_parent, span_id, path, spec.type, task.attempt,
                                        getattr(spec, "tool_name", None))
        try:
            result = await work
        except RunStopped as stop:
            raise ApplicationError(stop.message, stop.as_dict(), _dicts(events), type="run_stopped",
                                   non_retryable=True) from None
        except Exception as exc:  # every node failure is final here: the workflow's runner decides on retries
            failure = failure_of(exc)
            error = {**failure.as_dict(), "retryable": failure.retryable}
            raise ApplicationError(failure.message, error, _dicts(events), type=failure.code,
                                   non_retryable=True) from None
        finally:
            beat.cancel()
        spent = None
        if task.caller is not None and result.cost_usd > 0:
            spent = await asyncio.to_thread(self.store.add_spend, task.caller, result.cost_usd)
        return NodeDone(plain(result.output), result.cost_usd, result.usage.as_dict(), _dicts(events), spent)

    def _budget_left(self, task: NodeTask) -> float | None:
        """The least of what the run may spend and what its caller has left across every worker."""
        left = task.budget_left_usd
        if task.caller is not None and task.caller_budget_usd is not None:
            caller_left = task.caller_budget_usd - self.store.spent(task.caller)
            left = caller_left if left is None else min(left, caller_left)
        return left

    @activity.defn(name=WRITE_EVENTS)
    async def write_events(self, batch: EventBatch) -> None:
        """Append a batch of a run's journal, numbered by its workflow (a batch written twice lands once)."""
        await asyncio.to_thread(self._write_events, batch)

    def _write_events(self, batch: EventBatch) -> None:
        events = [Event.from_dict(e) for e in batch.events]
        # Every server sees who waits for a person; the record first, so a journal showing an answer never
        # comes with a record still asking.
        if any(e.type in QUESTION_EVENTS for e in events):
            self._keep_questions(batch.run_id, events)
        self.store.keep_journal(EventLog(batch.run_id, events=events))
        if not self.store.flush():
            raise RuntimeError("the run store did not write the events in time")
        if self.meter is not None:  # the one producer of a Temporal run's metrics: its servers only follow
            self.meter.journaled(batch.run_id, events, self.store.get)
        trace_workflow_nodes(batch.traceparent, events, self.plans.activity_types)

    def _keep_questions(self, run_id: str, events: list[Event]) -> None:
        """The run's record with its pending questions and `input_required` status, as its journal says."""
        record = self.store.get(run_id)
        if record is None or record.done:
            return
        for event in events:
            follow_event(record, event)
        self.store.save(record)

    @activity.defn(name=SAVE_RECORD)
    async def save_record(self, save: RecordSave) -> None:
        await asyncio.to_thread(self._save_record, save)

    def _save_record(self, save: RecordSave) -> None:
        record = RunRecord.from_dict(save.record)
        self.store.save(record)
        if not self.store.flush():
            raise RuntimeError("the run store did not write the record in time")
        tracing.end_run(record)  # the run's span, once, from its final record

    @activity.defn(name=LOAD_JOURNAL)
    async def load_journal(self, run_id: str) -> list[dict[str, Any]]:
        """A run's journal so far, for its execution continued as new."""
        return await asyncio.to_thread(self.store.events, run_id)

    @activity.defn(name=START_MEMBER)
    async def start_member(self, start: MemberStart) -> MemberStarted:
        """Begin one of a network's workflows as a run, as `Orchestrator.start` would: inputs checked, limits
        admitted, budgets checked, the run kept under the key `NETWORK_ID:WORKFLOW_ID` (so this activity run
        again finds the same run). A refusal is an answer (`error`), not a failure to retry."""
        info = activity.info()
        owner = temporal_owner(info.workflow_namespace or self.services.settings.temporal_namespace, info.task_queue)
        return await asyncio.to_thread(self._start_member, start, owner)

    def _start_member(self, start: MemberStart, owner: str) -> MemberStarted:
        key, caller = f"{start.network_id}:{start.workflow_id}", start.caller
        spent = self.store.spent(caller) if caller is not None else 0.0
        if (held := self._kept_run(key)) is not None:
            return MemberStarted(held.run_id, held.to_dict(), spent)
        if self.new_run is None:
            raise RuntimeError("this worker cannot begin a network's runs (no orchestrator)")
        member = start.member
        # Compiled as a workflow compiles it (the server checked it); the server's version and estimate.
        plan: Plan = dataclasses.replace(compile_plan(member.blueprint, self.plans.services, self.plans.node_types),
                                         version=member.version, document=member.blueprint,
                                         estimate=CostEstimate.model_validate(member.estimate))
        caller_spend = None if caller is None or start.caller_budget_usd is None else Spend(
            budget_usd=start.caller_budget_usd, cost_usd=spent)
        network_spend = Spend(budget_usd=start.budget_left_usd, parent=caller_spend)
        try:
            record = self.new_run(plan, start.inputs, idempotency_key=key, trigger=start.trigger, caller=caller,
                                  parent_spend=network_spend, engine="temporal")
        except IceError as exc:
            return MemberStarted(caller_spent_usd=spent, error=exc.as_dict())
        holder = self.store.create(record, idempotency_key=key, owner=owner, blueprint=plan.source_text(),
                                   version=record.workflow_version)
        if holder is not None and (held := self.store.get(holder)) is not None:  # an earlier try kept it first
            self.store.forget_admission(record.workflow, record.run_id)
            return MemberStarted(held.run_id, held.to_dict(), spent)
        return MemberStarted(record.run_id, record.to_dict(), spent)

    def _kept_run(self, key: str) -> RunRecord | None:
        run_id = self.store.by_idempotency_key(key)
        return self.store.get(run_id) if run_id is not None else None


def _dicts(events: EventLog) -> list[dict[str, Any]]:
    return [plain(event.to_dict()) for event in events.events]


async def _heartbeat(every: float) -> None:
    """Tell Temporal this attempt is alive (and hear of its cancellation) while the node runs."""
    with contextlib.suppress(asyncio.CancelledError):
        while True:
            activity.heartbeat()
            await asyncio.sleep(max(0.05, every))
