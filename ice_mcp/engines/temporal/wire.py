"""What travels between the MCP server, the workflows and the activities: plain dataclasses of JSON values
(Temporal's JSON converter encodes them; payloads over the claim-check threshold travel by reference)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

RUN_WORKFLOW = "ice_mcp.run"  # a run: workflow id = run id
NESTED_WORKFLOW = "ice_mcp.nested"  # a nested `workflow` node or a recursive flow's step, inside a run
NETWORK_WORKFLOW = "ice_mcp.network"  # a network: workflow id = network id; its workflows' runs are child workflows
NODE_ACTIVITY = "ice_mcp.node"  # one attempt of a node its type places in an activity (tool, llm, agent, code)
WRITE_EVENTS = "ice_mcp.write_events"  # local activities: the run's journal and record in the shared store
SAVE_RECORD = "ice_mcp.save_record"
LOAD_JOURNAL = "ice_mcp.load_journal"
START_MEMBER = "ice_mcp.start_member"  # a local activity: a network's workflow checked, admitted and kept as a run
NESTED_EVENTS_SIGNAL = "nested_events"  # a nested workflow's events, numbered by the run's own workflow
ANSWER_SIGNAL = "answer"  # a person's answer to a `human` node: {node, answer, by, at, declined}


def temporal_owner(namespace: str, task_queue: str) -> str:
    """Who runs the runs of a namespace's task queue, as the store's leases see it (never taken over)."""
    return f"temporal:{namespace}/{task_queue}"


@dataclass(slots=True)
class Tuning:
    """Engine knobs the server sets for every workflow of a run."""

    heartbeat_seconds: float = 3.0  # an activity silent this long has lost its worker: it runs again
    history_limit: int = 10_000  # past this many history events a run continues as new


@dataclass(kw_only=True)
class Invocation:
    """What every workflow of a run is started with: the workflows it may call, the run's globals, who
    called and what they may spend, and the engine's knobs."""

    workflows: dict[str, dict[str, Any]] = field(default_factory=dict)
    globals: dict[str, Any] = field(default_factory=dict)
    caller: str | None = None
    caller_budget_usd: float | None = None
    caller_spent_usd: float = 0.0
    budget_left_usd: float | None = None  # what an enclosing budget (a network's) leaves the run
    tuning: Tuning = field(default_factory=Tuning)
    trigger: dict[str, Any] = field(default_factory=lambda: {"kind": "call"})  # the run's, for nested workflows


@dataclass
class RunStart(Invocation):
    """A run's workflow input. `replay`: journal events whose finished nodes it reuses (a retry);
    `resume`: continued as new, so its own journal in the store is replayed too."""

    run_id: str
    blueprint: dict[str, Any]
    record: dict[str, Any]
    replay: list[dict[str, Any]] = field(default_factory=list)
    resume: bool = False
    next_seq: int = 0


@dataclass
class InRun:
    """Where work inside a run stands: run `run_id`, node path `path`, `depth` nested workflows down."""

    run_id: str
    path: str
    depth: int


@dataclass
class NestedStart(InRun, Invocation):
    """A nested workflow's input: it runs inside run `run_id` at `path`, its events numbered by that run."""

    blueprint: dict[str, Any]
    inputs: dict[str, Any]
    trace_parent: str | None = None  # the span its nodes' spans hang under (its `workflow` node's)


@dataclass(slots=True)
class NestedDone:
    output: Any
    cost_usd: float
    usage: dict[str, int]
    caller_spent_usd: float = 0.0


@dataclass
class NodeTask(InRun):
    """One attempt of one node for an activity: its spec and its fields already rendered by the workflow."""

    node: dict[str, Any]
    rendered: dict[str, Any]
    attempt: int
    budget_left_usd: float | None = None
    globals: dict[str, Any] = field(default_factory=dict)
    caller: str | None = None
    caller_budget_usd: float | None = None
    heartbeat_seconds: float = 3.0
    trace_parent: str | None = None  # the span this attempt's span hangs under (None: the run is not traced)


@dataclass(slots=True)
class NodeDone:
    """What the node produced, the events it emitted meanwhile, and its caller's spend after it."""

    output: dict[str, Any]
    cost_usd: float
    usage: dict[str, int]
    events: list[dict[str, Any]] = field(default_factory=list)
    caller_spent_usd: float | None = None


@dataclass(slots=True)
class EventBatch:
    run_id: str
    events: list[dict[str, Any]]
    traceparent: str | None = None  # the run's: the writer makes the spans of the nodes the workflow ran itself


@dataclass(slots=True)
class RecordSave:
    run_id: str
    record: dict[str, Any]


@dataclass
class Member:
    """A network's workflow as the server resolved it: its blueprint document, registered version and estimate."""

    blueprint: dict[str, Any]
    version: int | None = None
    estimate: dict[str, Any] = field(default_factory=dict)


@dataclass
class NetworkStart(Invocation):
    """A network's workflow input: its manifest, its record (kept by the server already) and its workflows
    (by id in the manifest); `trigger` is what its templates see, `workflows` what its runs may call."""

    network_id: str
    manifest: dict[str, Any]
    record: dict[str, Any]
    members: dict[str, Member]


@dataclass
class MemberStart:
    """One of a network's workflows to begin as a run (key `NETWORK_ID:WORKFLOW_ID`): checked against its
    inputs schema, its limits and the budgets left, and kept in the store, as `Orchestrator.start` does."""

    network_id: str
    workflow_id: str
    member: Member
    inputs: dict[str, Any]
    trigger: dict[str, Any] | None = None
    caller: str | None = None
    caller_budget_usd: float | None = None
    budget_left_usd: float | None = None  # what the network's own budget leaves


@dataclass
class MemberStarted:
    """The member's run as kept (`record`; an activity run again finds the same one), the caller's spend now;
    or why it was refused (`error`: invalid_inputs, rate_limited, over_budget, unsupported)."""

    run_id: str | None = None
    record: dict[str, Any] | None = None
    caller_spent_usd: float = 0.0
    error: dict[str, Any] | None = None
