"""Run and node records, in the spec's format."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ice_mcp.types import Usage

NETWORK_ID_PREFIX = "net_"  # a network run's id (its record is kept beside the runs of its workflows)
# A run is under way while running, while a `human` node waits for an answer, or while its workflow's
# `limits` (on_limit: queue) hold it back.
ACTIVE = frozenset({"running", "input_required", "queued"})


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")


@dataclass(slots=True)
class NodeRecord:
    status: str = "pending"
    attempts: int = 0
    duration_ms: float = 0.0
    output: Any = None
    error: dict[str, Any] | None = None
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "attempts": self.attempts,
            "duration_ms": round(self.duration_ms, 3),
            "output": self.output,
            "error": self.error,
            "cost_usd": self.cost_usd,
            "tokens": self.usage.as_dict(),
        }


@dataclass(slots=True)
class RunRecord:
    run_id: str
    workflow: str
    inputs: dict[str, Any]
    status: str = "running"
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    started_at: float | None = None
    finished_at: float | None = None
    duration_ms: float | None = None
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    workflow_version: int | None = None  # the registered version the run ran (None: a file or an ad-hoc blueprint)
    retry_of: str | None = None  # the run this one retries, reusing its finished nodes
    # Questions `human` nodes wait on, by node path: {question, schema, asked_at, deadline, approval}.
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What started it, as templates see `trigger`: None for a call; {"kind": "schedule", "schedule_id", "slot",
    # "previous_slot"} for a schedule's slot.
    trigger: dict[str, Any] | None = None
    # Who owns it (an OAuth user `oauth:<iss>#<sub>`, `token`, `local`; None: no caller, like a CLI run).
    principal: str | None = None
    # W3C `traceparent` of the run's own span: a resumed, retried or taken-over run goes on in the same trace.
    traceparent: str | None = None
    trace_parent_span: str | None = None  # the span id the run's span hangs under (None: the trace's root)

    @property
    def done(self) -> bool:
        return self.status not in ACTIVE

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow": self.workflow,
            "status": self.status,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "error": self.error,
            "cost_usd": self.cost_usd,
            "tokens": self.usage.as_dict(),
            "started_at": iso(self.started_at),
            "finished_at": iso(self.finished_at),
            "duration_ms": None if self.duration_ms is None else round(self.duration_ms, 3),
            "nodes": {node_id: node.to_dict() for node_id, node in self.nodes.items()},
            **({"workflow_version": self.workflow_version} if self.workflow_version is not None else {}),
            **({"retry_of": self.retry_of} if self.retry_of is not None else {}),
            **({"questions": self.questions} if self.questions else {}),
            **({"trigger": self.trigger} if self.trigger is not None else {}),
            **({"principal": self.principal} if self.principal is not None else {}),
            **({"traceparent": self.traceparent} if self.traceparent is not None else {}),
            **({"trace_parent_span": self.trace_parent_span} if self.trace_parent_span is not None else {}),
        }

    def summary(self) -> dict[str, Any]:
        """The few fields a list of runs shows (what the store keeps beside the record, to list without it)."""
        return summary_of(self.run_id, self.workflow, self.status, iso(self.started_at), iso(self.finished_at),
                          self.duration_ms, self.cost_usd, self.error, self.trigger)

    def envelope(self) -> dict[str, Any]:
        """What a tool call answers: `{run_id, status, outputs, error, cost_usd, duration_ms}`."""
        envelope = {"run_id": self.run_id, "status": self.status, "outputs": self.outputs, "error": self.error,
                    "cost_usd": self.cost_usd,
                    "duration_ms": None if self.duration_ms is None else round(self.duration_ms, 3)}
        if self.questions:
            envelope["questions"] = {path: {"question": q.get("question"), "schema": q.get("schema")}
                                     for path, q in self.questions.items()}
        return envelope

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        def ts(value: str | None) -> float | None:
            return None if value is None else datetime.fromisoformat(value).timestamp()

        def usage(value: dict[str, int] | None) -> Usage:
            return Usage(**(value or {}))

        return cls(
            run_id=data["run_id"],
            workflow=data["workflow"],
            inputs=data.get("inputs") or {},
            status=data["status"],
            outputs=data.get("outputs"),
            error=data.get("error"),
            cost_usd=data.get("cost_usd", 0.0),
            usage=usage(data.get("tokens")),
            started_at=ts(data.get("started_at")),
            finished_at=ts(data.get("finished_at")),
            duration_ms=data.get("duration_ms"),
            nodes={
                node_id: NodeRecord(
                    status=n["status"],
                    attempts=n.get("attempts", 0),
                    duration_ms=n.get("duration_ms", 0.0),
                    output=n.get("output"),
                    error=n.get("error"),
                    cost_usd=n.get("cost_usd", 0.0),
                    usage=usage(n.get("tokens")),
                )
                for node_id, n in (data.get("nodes") or {}).items()
            },
            workflow_version=data.get("workflow_version"),
            retry_of=data.get("retry_of"),
            questions=dict(data.get("questions") or {}),
            trigger=data.get("trigger"),
            principal=data.get("principal"),
            traceparent=data.get("traceparent"),
            trace_parent_span=data.get("trace_parent_span"),
        )


SUMMARY_ERROR_CHARS = 300  # a summary's error message is cut here: a summary stays well under 2 KB


def summary_of(run_id: str, workflow: str, status: str, started_at: str | None, finished_at: str | None,
               duration_ms: float | None, cost_usd: float, error: dict[str, Any] | None,
               trigger: dict[str, Any] | None) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "run_id": run_id, "workflow": workflow, "status": status, "started_at": started_at,
        "finished_at": finished_at, "duration_ms": None if duration_ms is None else round(duration_ms, 3),
        "cost_usd": cost_usd}
    if error is not None:
        summary["error"] = {"code": error.get("code"), "message": str(error.get("message", ""))[:SUMMARY_ERROR_CHARS]}
    if trigger is not None:
        summary["trigger"] = trigger
    return summary


def summary_of_dict(data: dict[str, Any]) -> dict[str, Any]:
    """A record's summary from its `to_dict()` form (the store's writer has that, not the record)."""
    return summary_of(data["run_id"], data["workflow"], data["status"], data.get("started_at"),
                      data.get("finished_at"), data.get("duration_ms"), data.get("cost_usd", 0.0), data.get("error"),
                      data.get("trigger"))


@dataclass(frozen=True, slots=True)
class Listed:
    """What both stores keep beside a record (from its `to_dict()` form) so lists filter and page without it."""

    principal: str | None
    trigger_kind: str
    summary: dict[str, Any]
    finished_at: float | None  # Unix seconds (retention)

    @classmethod
    def of(cls, data: dict[str, Any]) -> Listed:
        finished = data.get("finished_at")
        return cls(data.get("principal"), trigger_kind(data.get("trigger")), summary_of_dict(data),
                   None if finished is None else datetime.fromisoformat(finished).timestamp())


def trigger_kind(trigger: dict[str, Any] | None) -> str:
    """What started a run, as lists filter by it: `call` (a tool call, /rpc, the CLI), `schedule`, `webhook`..."""
    kind = (trigger or {}).get("kind")
    return str(kind) if kind else "call"
