"""`human` nodes: ask a person a question (or for an approval) and wait, without holding a worker.

The question is rendered, journaled as `node_waiting` and left on the orchestrator's desk; whoever can
reach the person (an MCP task, a multi-round tool call, elicitation, `run_respond`, the terminal) answers
through `Orchestrator.respond`. The deadline counts from the first time the question was asked, so a
restart neither loses the question nor extends its time.

Output: `{"answer", "answered_by", "answered_at", "timed_out"}`. An approval gate's answer is
`{"approved": bool, "reason": str}`; a rejection fails the node with the reason (code `rejected`): set
`on_error: continue` to branch on it instead (a `condition` on `'error' not in ok`).
"""

from __future__ import annotations

from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue
from ice_mcp.blueprint.models import HumanNode, NodeSpec, OnTimeoutDefault
from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.core.executor import CheckContext, NodeCall, NodeType
from ice_mcp.core.questions import Question
from ice_mcp.errors import NodeFailure
from ice_mcp.store.records import iso
from ice_mcp.store.vocabulary import EventType
from ice_mcp.types import Effects, NodeResult

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "title": "Approve", "description": "true to go ahead, false to stop"},
        "reason": {"type": "string", "title": "Reason", "description": "why (shown when it is rejected)"},
    },
    "required": ["approved"],
}
TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "title": "Answer"}},
    "required": ["answer"],
}


def answer_schema(spec: HumanNode) -> dict[str, Any]:
    if spec.approval is not None:
        return APPROVAL_SCHEMA
    return spec.answer_schema if spec.answer_schema is not None else TEXT_SCHEMA


async def execute_human(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, HumanNode)
    desk, now = call.questions, call.ctx.runner.now  # the runner's clock: Temporal's inside a workflow
    asked_at, answer = desk.earlier(call.run_id, call.node_path, call.attempt)  # a resumed run's journal
    if answer is None:
        asked_at = asked_at or now()
        deadline = asked_at + spec.timeout_seconds if spec.timeout_seconds is not None else None
        text = call.render("approval" if spec.approval is not None else "prompt")
        question = Question(call.run_id, call.node_path, call.attempt, str(text), answer_schema(spec), asked_at,
                            deadline, approval=spec.approval is not None)
        call.ctx.emit(EventType.NODE_WAITING, call.node.id, call.attempt, **question.to_event())
        try:
            answer = await desk.wait(question, None if deadline is None else max(0.0, deadline - now()))
        except TimeoutError:
            if not isinstance(spec.on_timeout, OnTimeoutDefault):
                raise NodeFailure(f"nobody answered within {spec.timeout_seconds:g} s", code="timeout",
                                  retryable=False) from None
            answer = None
    if answer is None:  # timed out: the default answers
        assert isinstance(spec.on_timeout, OnTimeoutDefault)
        return _result(spec, spec.on_timeout.default, None, None, timed_out=True)
    if answer.declined:
        if spec.approval is not None:
            return _result(spec, {"approved": False, "reason": "declined"}, answer.by, answer.at, timed_out=False)
        raise NodeFailure(f"the question was declined ({answer.by})", code="declined", retryable=False)
    return _result(spec, answer.value, answer.by, answer.at, timed_out=False)


def _result(spec: HumanNode, value: Any, by: str | None, at: float | None, *, timed_out: bool) -> NodeResult:
    output = {"answer": value, "answered_by": by, "answered_at": iso(at), "timed_out": timed_out}
    if spec.approval is not None and not (isinstance(value, dict) and value.get("approved") is True):
        reason = str(value.get("reason") or "") if isinstance(value, dict) else ""
        raise NodeFailure(f"rejected: {reason or 'no reason given'}", code="rejected", retryable=False,
                          details=output)
    return NodeResult(output)


def check_human(spec: NodeSpec, ctx: CheckContext) -> list[ValidationIssue]:
    """The answer schema is a usable JSON Schema of an object, and a default answer fits it."""
    assert isinstance(spec, HumanNode)
    schema = answer_schema(spec)
    try:
        validator = schema_validator(schema)
    except SchemaInvalid as exc:
        return [ValidationIssue(code=exc.code, message=f"schema: {exc.message}", node_id=spec.id, field="schema")]
    issues = []
    if schema.get("type") != "object":
        issues.append(ValidationIssue(code="invalid_schema", message="the answer schema must have type: object "
                                      "(people answer with a form)", node_id=spec.id, field="schema"))
    if isinstance(spec.on_timeout, OnTimeoutDefault):
        for error in list(validator.iter_errors(spec.on_timeout.default))[:5]:
            where = "/".join(str(p) for p in error.absolute_path) or "(default)"
            issues.append(ValidationIssue(code="invalid_default", message=f"on_timeout.default does not fit the "
                                          f"answer schema: {where}: {error.message[:200]}", node_id=spec.id,
                                          field="on_timeout"))
    return issues


# A person answers from outside, and not the same answer twice.
# On Temporal its wait is the workflow's own (an answer comes as a signal), durable across workers.
HUMAN_NODE = NodeType(name="human", execute=execute_human, check=check_human, own_timeout=True,
                      effects=Effects(read_only=True, destructive=False, idempotent=False, open_world=True),
                      model=HumanNode, placement="workflow")
