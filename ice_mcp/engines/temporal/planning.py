"""Everything a run's workflow code does, kept deterministic: the same runner and pure scheduler as the
embedded engine, nodes that do I/O sent to activities, nested workflows started as child workflows, events
numbered and sent to the shared store, and a clean stop when the history grows long (continue-as-new).

Imported by the sandboxed workflow module as a pass-through module (its plans are compiled once per
worker process, not once per workflow run, with the node types of the worker serving the workflow's task queue)."""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
)

from ice_mcp.core.blueprints import compile_plan
from ice_mcp.core.context import RunContext, Spend, SubgraphResult
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.core.plan import Plan
from ice_mcp.core.questions import Answer, Questions
from ice_mcp.core.runner import Runner
from ice_mcp.engines.temporal.wire import (
    ANSWER_SIGNAL,
    NESTED_EVENTS_SIGNAL,
    NESTED_WORKFLOW,
    NODE_ACTIVITY,
    WRITE_EVENTS,
    EventBatch,
    NestedDone,
    NestedStart,
    NodeDone,
    NodeTask,
    Tuning,
)
from ice_mcp.errors import NodeFailure, RunStopped, UnknownName
from ice_mcp.nodes import builtin_node_types
from ice_mcp.nodes.recursive import recursive_node_type
from ice_mcp.services import Services
from ice_mcp.settings import Settings
from ice_mcp.store.events import Event, EventLog
from ice_mcp.tools.registry import Registry
from ice_mcp.types import NodeResult, Usage

NO_TIMEOUT = timedelta(days=1)  # an activity's backstop when its node has no timeout (heartbeats find lost workers)
TIMEOUT_GRACE_SECONDS = 30.0  # past the node's own timeout (kept by the activity), before Temporal steps in
# Node failures are final for Temporal (the runner retries them as the blueprint says, with the same attempt
# numbers as the embedded engine); only a lost worker makes Temporal run the same attempt again.
LOST_WORKER_RETRIES = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10),
                                  maximum_attempts=20)
LOCAL_TIMEOUT = timedelta(seconds=60)  # a local activity (the journal, the record, a network's member start)
PLAN_CACHE = 256


def workflow_now() -> float:
    """The workflow's deterministic wall clock, in Unix seconds (events and records stamped inside it)."""
    return workflow.now().timestamp()


async def dispatch(call: NodeCall) -> NodeResult:
    """A node that does I/O, as one activity: its fields are rendered here, in the workflow."""
    runner = call.ctx.runner
    assert isinstance(runner, WorkflowRunner)
    await runner.gate()
    rendered = {name: template.render(call.scope) for name, template in call.node.templates.items()}
    spec = call.spec
    tuning = runner.tuning
    task = NodeTask(call.run_id, call.ctx.path, call.ctx.depth, runner.node_document(call.node), rendered,
                    call.attempt, call.spend.remaining(), call.ctx.globals, runner.caller.name,
                    runner.caller.budget_usd, tuning.heartbeat_seconds, call.ctx.trace_parent)
    timeout = NO_TIMEOUT if spec.timeout_seconds is None else timedelta(
        seconds=spec.timeout_seconds + TIMEOUT_GRACE_SECONDS)
    with runner.in_flight():
        try:
            done = await workflow.execute_activity(
                NODE_ACTIVITY, task, result_type=NodeDone, start_to_close_timeout=timeout,
                heartbeat_timeout=timedelta(seconds=tuning.heartbeat_seconds), retry_policy=LOST_WORKER_RETRIES,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        except ActivityError as exc:
            raise runner.failure(call, exc.cause) from None
    runner.replay_events(call, done.events)
    runner.caller.observe(done.caller_spent_usd, done.cost_usd)
    return NodeResult(done.output, done.cost_usd, Usage(**done.usage))


def workflow_node_types(node_types: Iterable[NodeType], unavailable: Iterable[str] = ()) -> dict[str, NodeType]:
    """Node types as a workflow runs them, by their placement: those placed in the workflow (containers,
    conditions, `human` nodes whose question waits on a signal, durably) run there, the others (and the known
    types unavailable here) as activities. No checks: the server validated the blueprint against its catalogue
    before starting the run."""
    # An activity times each attempt itself: a worker lost mid-attempt costs the attempt nothing, for the run
    # again (after the heartbeat timeout) gets the node's whole timeout, as a new attempt would on embedded.
    agent = NodeType("agent", dispatch, own_timeout=True)
    types: dict[str, NodeType] = {}
    for t in node_types:
        if t.placement == "activity":
            types[t.name] = NodeType(t.name, dispatch, own_timeout=True, model=t.model)
        elif t.name == "recursive":  # its agent steps are agent nodes: sent to activities too
            types[t.name] = NodeType(t.name, recursive_node_type(agent=agent).execute, model=t.model,
                                     placement="workflow")
        else:
            types[t.name] = NodeType(t.name, t.execute, own_timeout=t.own_timeout, model=t.model, placement="workflow")
    for name in unavailable:
        types.setdefault(name, NodeType(name, dispatch, own_timeout=True))
    return types


# Settings with explicit folders: nothing here reads the environment or the disk.
WORKFLOW_SERVICES = Services(Registry(), Settings(data_dir=Path("."), workspace=Path(".")))


class PlanCache:
    """Plans compiled in workflows, by document: compiling is deterministic, and a plan is read-only once made."""

    def __init__(self, node_types: dict[str, NodeType]) -> None:
        self.node_types = node_types
        self.activity_types = frozenset(name for name, t in node_types.items() if t.placement == "activity")
        self.services = WORKFLOW_SERVICES
        self._plans: OrderedDict[bytes, Plan] = OrderedDict()

    def plan(self, document: dict[str, Any]) -> Plan:
        key = hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).digest()
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = compile_plan(document, self.services, self.node_types)
            while len(self._plans) > PLAN_CACHE:
                self._plans.popitem(last=False)
        self._plans.move_to_end(key)
        return plan


PLANS = PlanCache(workflow_node_types(*builtin_node_types()))  # a task queue no worker here serves: the built-ins
_SERVED: dict[str, PlanCache] = {}  # by task queue: the node types of the worker serving it in this process


def serve_node_types(task_queue: str, node_types: Iterable[NodeType], unavailable: Iterable[str] = ()) -> PlanCache:
    """The plans of `task_queue`'s workflows from now on, compiled with these node types (a worker's)."""
    plans = _SERVED[task_queue] = PlanCache(workflow_node_types(node_types, unavailable))
    return plans


def stop_serving(task_queue: str, plans: PlanCache) -> None:
    if _SERVED.get(task_queue) is plans:
        del _SERVED[task_queue]


def plans_for(task_queue: str) -> PlanCache:
    """The plans of a task queue's workflows (deterministic: a workflow's task queue never changes)."""
    return _SERVED.get(task_queue, PLANS)


class CallerSpend(Spend):
    """A caller's spend across every run and worker, as last seen: activities charge the shared run store and
    report its total, which this mirror follows before the run charges the node's own cost."""

    def __init__(self, name: str | None, budget_usd: float | None, spent_usd: float) -> None:
        super().__init__(budget_usd=budget_usd, cost_usd=spent_usd)
        self.name = name

    def observe(self, total_usd: float | None, node_cost_usd: float) -> None:
        if total_usd is not None:
            self.cost_usd = max(self.cost_usd, total_usd - node_cost_usd)


class WorkflowPump:
    """One task of a workflow that sends what has queued up, one send in flight at a time (two could land out of
    order), until it is closed with nothing left to send."""

    def __init__(self) -> None:
        self._closing = False
        self._pump: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._pump is None:
            self._pump = asyncio.create_task(self._run())

    async def close(self) -> None:
        """Send what is queued, then stop."""
        self._closing = True
        if self._pump is not None:
            await self._pump

    def _queued(self) -> bool:
        raise NotImplementedError

    async def _send(self) -> None:
        raise NotImplementedError

    async def _run(self) -> None:
        while True:
            await workflow.wait_condition(lambda: self._queued() or self._closing)
            if not self._queued():
                return
            await self._send()


class EventSink(WorkflowPump):
    """A run's events in order: the run's own workflow numbers them and writes them to the store (local
    activities, batched while one is in flight); a nested workflow signals them to the run's workflow."""

    def __init__(self, run_id: str, next_seq: int = 0, *, nested: bool = False) -> None:
        super().__init__()
        self.run_id, self.next_seq, self.nested = run_id, next_seq, nested
        self.traceparent: str | None = None  # the run's, when it is traced
        self.pending: list[dict[str, Any]] = []

    def __call__(self, event: Event) -> None:
        """An EventLog listener: queue the event (numbered by the run's workflow)."""
        self.add(event.to_dict())

    def add(self, event: dict[str, Any]) -> None:
        if not self.nested:
            event = {**event, "seq": self.next_seq}
            self.next_seq += 1
        self.pending.append(event)

    def _queued(self) -> bool:
        return bool(self.pending)

    async def _send(self) -> None:
        batch, self.pending = self.pending, []
        if self.nested:
            await workflow.get_external_workflow_handle(self.run_id).signal(NESTED_EVENTS_SIGNAL, batch)
        else:
            await workflow.execute_local_activity(WRITE_EVENTS, EventBatch(self.run_id, batch, self.traceparent),
                                                  start_to_close_timeout=LOCAL_TIMEOUT)


class WorkflowRunner(Runner):
    """The runner inside a workflow: Temporal's clock, nested workflows as child workflows, the questions its
    `human` nodes wait on (answered by signal), and a gate that holds new activities while the run prepares to
    continue as new."""

    emits_spans = False  # replayed at will: its activities make the spans of the nodes they run, the worker the rest

    def __init__(self, run_id: str, workflows: dict[str, dict[str, Any]], caller: CallerSpend, tuning: Tuning,
                 sink: EventSink) -> None:
        super().__init__(now=workflow_now, perf=workflow.time)
        self.run_id, self.workflows, self.caller, self.tuning, self.sink = run_id, workflows, caller, tuning, sink
        self.plans = plans_for(workflow.info().task_queue)
        self.draining = False
        self.questions = Questions()
        self._children: dict[str, str] = {}  # nested workflows in flight: their node path prefix -> workflow id
        self._sending: set[asyncio.Future[None]] = set()  # answers sent on to nested workflows
        self._in_flight = 0
        self._documents: dict[int, dict[str, Any]] = {}

    def catalogue(self, name: str) -> Plan:
        """A registered workflow's plan, from the documents the server sent with the run."""
        document = self.workflows.get(name)
        if document is None:
            raise UnknownName("workflow", name)
        return self.plans.plan(document)

    def node_document(self, node: Any) -> dict[str, Any]:
        found = self._documents.get(id(node))
        if found is None:
            found = self._documents[id(node)] = node.spec.model_dump(mode="json", by_alias=True, exclude_unset=True)
        return found

    # -- continue-as-new ---------------------------------------------------------------------------------

    async def gate(self) -> None:
        """Start nothing new once the run is draining: its next execution (continued as new) will."""
        if self.draining:
            await workflow.wait_condition(lambda: False)

    def in_flight(self) -> _InFlight:
        return _InFlight(self)

    @property
    def drained(self) -> bool:
        return self.draining and self._in_flight == 0

    def _settled(self) -> None:
        info = workflow.info()
        if info.is_continue_as_new_suggested() or info.get_current_history_length() > self.tuning.history_limit:
            self.draining = True

    # -- answers ----------------------------------------------------------------------------------------

    def take_answer(self, data: dict[str, Any], events: EventLog) -> None:
        """A person's answer (the server checked it against the question's schema): journaled and handed to
        the node waiting here, or sent on to the nested workflow that asked. One nobody waits for is dropped
        (the server that sent it says so when the journal does not show it taken)."""
        path = str(data.get("node"))
        question = self.questions.waiting(self.run_id, path)
        if question is None:
            for prefix, child in self._children.items():
                if path.startswith(prefix):
                    handle = workflow.get_external_workflow_handle(child)
                    self._sending.add(sent := asyncio.ensure_future(handle.signal(ANSWER_SIGNAL, data)))
                    sent.add_done_callback(self._sending.discard)
                    return
            workflow.logger.warning("an answer to %r came while no node of it waits", path)
            return
        answer = Answer(data.get("answer"), str(data.get("by") or "api"), float(data.get("at") or self.now()),
                        declined=bool(data.get("declined")))
        self.questions.take(question, answer, events)

    # -- outcomes ---------------------------------------------------------------------------------------

    def replay_events(self, call: NodeCall, events: list[dict[str, Any]]) -> None:
        """Events an activity's node emitted (its node ids carry their path already)."""
        for event in events:
            call.ctx.events.emit(event["type"], event.get("node_id"), event.get("attempt"), **(event.get("data") or {}))

    def failure(self, call: NodeCall | None, cause: BaseException | None) -> BaseException:
        """The error an activity or a nested workflow ended with, as the embedded engine would raise it."""
        if isinstance(cause, CancelledError):
            return asyncio.CancelledError()
        if isinstance(cause, ApplicationError) and cause.details:
            error, events = cause.details[0], cause.details[1] if len(cause.details) > 1 else []
            if call is not None:
                self.replay_events(call, events)
            if cause.type == "run_stopped":
                return RunStopped(str(error.get("code")), str(error.get("message")))
            return NodeFailure(str(error.get("message", "")), code=str(error.get("code", "node_error")),
                               retryable=bool(error.get("retryable")), details=error.get("details"))
        return NodeFailure(f"the engine lost this node: {cause}", code="engine_error")

    async def run_workflow(self, plan: Plan, inputs: dict[str, Any], ctx: RunContext) -> SubgraphResult:
        """A nested workflow as a child workflow; its spend charges this run as it returns."""
        await self.gate()
        start = NestedStart(ctx.run_id, ctx.path, ctx.depth, plan.source(), inputs, workflows=self.workflows,
                            globals=ctx.globals, caller=self.caller.name, caller_budget_usd=self.caller.budget_usd,
                            caller_spent_usd=self.caller.cost_usd, budget_left_usd=ctx.spend.remaining(),
                            tuning=self.tuning, trigger=ctx.trigger, trace_parent=ctx.trace_parent)
        child = self._children[ctx.path] = f"{ctx.run_id}/{ctx.path.rstrip('.')}"
        with self.in_flight():
            try:
                done = await workflow.execute_child_workflow(NESTED_WORKFLOW, start, result_type=NestedDone, id=child)
            except ChildWorkflowError as exc:
                raise self.failure(None, exc.cause) from None
            finally:
                self._children.pop(ctx.path, None)
        usage = Usage(**done.usage)
        self.caller.observe(done.caller_spent_usd, done.cost_usd)
        ctx.spend.charge(done.cost_usd, usage)
        return SubgraphResult(done.output, {}, {}, done.cost_usd, usage)

    async def run_nested(self, plan: Plan, inputs: dict[str, Any], ctx: RunContext) -> SubgraphResult:
        """A child workflow's own body: the embedded engine's nested-workflow semantics (inputs, budget, timeout)."""
        return await Runner.run_workflow(self, plan, inputs, ctx)


class _InFlight:
    """Counts an activity or a child workflow in flight, and checks the history's length as each one ends."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner

    def __enter__(self) -> None:
        self.runner._in_flight += 1

    def __exit__(self, *exc: object) -> None:
        self.runner._in_flight -= 1
        self.runner._settled()

