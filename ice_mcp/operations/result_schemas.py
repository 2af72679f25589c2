"""The JSON Schemas of what tools answer: a run's envelope (typed by each workflow's, tool's and agent's outputs)
and each built-in tool's own result.

No MCP SDK here: the command line reads the built-ins' table, which uses these. Every schema passes ajv in
strict mode (every `required` name is a listed property, types stated, no unknown keywords). Nested parts stay
open (no `additionalProperties: false`, few `required`): a client that cached a tool's schema before the workflow
was registered again with other outputs must still accept its results.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from ice_mcp.operations.flat_schema import flatten_schema

# A run's statuses (tool_table.RUN_STATUSES) and `error`, the status of a call refused before any run started.
ENVELOPE_STATUSES = ["queued", "running", "input_required", "succeeded", "failed", "cancelled", "timed_out",
                     "over_budget", "error"]
_STRING_OR_NULL = {"type": ["string", "null"]}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_OBJECT_OR_NULL = {"type": ["object", "null"]}
_ANY_OBJECT: dict[str, Any] = {"type": "object"}
# No descriptions: every tool repeats its schema in tools/list (issue 27 holds a large list to 40 KB); a result's
# text says what to do next (follow a running run, answer a question), names and types carry the rest.
ERROR_SCHEMA: dict[str, Any] = {"type": ["object", "null"],
                                "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}
QUESTIONS_SCHEMA: dict[str, Any] = _ANY_OBJECT  # by node path: {question, schema}, while input_required
ANY_OUTPUTS: dict[str, Any] = _OBJECT_OR_NULL


def envelope_schema(outputs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A tool's result as a run envelope (`RunRecord.envelope()`, or `envelope.error_result` when refused)."""
    return {
        "type": "object",
        "properties": {
            "run_id": _STRING_OR_NULL,
            "status": {"type": "string", "enum": ENVELOPE_STATUSES},
            "outputs": dict(outputs) if outputs is not None else ANY_OUTPUTS,
            "error": ERROR_SCHEMA,
            "cost_usd": _NUMBER_OR_NULL,
            "duration_ms": _NUMBER_OR_NULL,
            "questions": QUESTIONS_SCHEMA,
        },
        "required": ["run_id", "status", "outputs", "error", "cost_usd", "duration_ms"],
    }


def outputs_schema(names: Iterable[str], values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`outputs` with these names as properties (the value's schema where known, else any value); not
    `required`, as a stale client's cache may describe an earlier version of the workflow."""
    values = values or {}
    return {"type": ["object", "null"], "properties": {name: dict(values.get(name) or {}) for name in names}}


ENVELOPE_SCHEMA = envelope_schema()


def workflow_result_schema(declared: Mapping[str, Any] | None, sinks: Iterable[str] = ()) -> dict[str, Any]:
    """A workflow tool's envelope: `outputs` names the blueprint's declared outputs, or else the nodes nothing
    depends on (whose outputs a run without declared outputs answers)."""
    if isinstance(declared, Mapping):
        return envelope_schema(outputs_schema(declared))
    names = list(sinks)
    return envelope_schema(outputs_schema(names)) if names else ENVELOPE_SCHEMA


def tool_result_schema(function: Any) -> dict[str, Any]:
    """A `tool_<name>` call's envelope: `outputs.result` is what the tool returns, typed when its return
    annotation is a TypedDict or a pydantic model (a plain dict says no more than `object`)."""
    result = _returned_schema(function) or _ANY_OBJECT
    return envelope_schema(outputs_schema(["result"], {"result": result}))


def _returned_schema(function: Any) -> dict[str, Any] | None:
    try:
        returned = typing.get_type_hints(function).get("return")
        if returned is None or not (is_typeddict(returned) or (isinstance(returned, type)
                                                                and issubclass(returned, BaseModel))):
            return None
        return flatten_schema(_schema_of(returned))
    except Exception:  # an annotation pydantic cannot describe: the result stays an object
        return None


def _schema_of(annotation: Any) -> dict[str, Any]:
    """JSON Schema of a type as the client reads it (serialization mode: what `as_object` dumps); a TypedDict
    field by field, as pydantic refuses `typing.TypedDict` before Python 3.12."""
    if is_typeddict(annotation):
        fields = typing.get_type_hints(annotation)
        required = getattr(annotation, "__required_keys__", frozenset(fields))
        schema: dict[str, Any] = {"type": "object", "properties": {k: _schema_of(v) for k, v in fields.items()}}
        if names := [key for key in fields if key in required]:
            schema["required"] = names
        return schema
    return TypeAdapter(annotation).json_schema(mode="serialization")


AGENT_RESULT_SCHEMA = envelope_schema(outputs_schema(["text", "result"], {"text": _STRING_OR_NULL,
                                                                         "result": _OBJECT_OR_NULL}))

# -- the built-ins' results -------------------------------------------------------------------------------------

def _obj(properties: dict[str, Any], required: list[str] | None = None, description: str | None = None
         ) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


def _array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items}
    if description:
        schema["description"] = description
    return schema


_NETWORK_PROPERTIES: dict[str, Any] = {
    "network": {"type": "string"}, "network_id": {"type": "string"}, "cost_usd": _NUMBER_OR_NULL,
    "workflows": {"type": "object", "description": "By id: {status, run_id, outputs, error}"}}
NETWORK_SCHEMA = _obj({**_NETWORK_PROPERTIES, "status": {"type": "string"}}, ["network_id", "status"])
# run_result follows a run or, for a net_ id, a network: the envelope's fields or the network's.
RUN_OR_NETWORK_SCHEMA = _obj({**envelope_schema()["properties"], **_NETWORK_PROPERTIES, "status": {"type": "string"}},
                             ["status"], "The run's envelope, or for a net_ id the network's result.")
RECORD_SCHEMA = _obj({
    "run_id": _STRING_OR_NULL, "workflow": _STRING_OR_NULL, "status": _STRING_OR_NULL, "inputs": _OBJECT_OR_NULL,
    "outputs": {}, "error": {}, "cost_usd": _NUMBER_OR_NULL, "started_at": _STRING_OR_NULL,
    "finished_at": _STRING_OR_NULL, "duration_ms": _NUMBER_OR_NULL, "nodes": _OBJECT_OR_NULL,
    "questions": _OBJECT_OR_NULL, "seen": {"type": "integer"}},
    description="The run's record, each node's state by id; with seen: what changed since; with node: its detail")
_SUMMARY = _obj({"run_id": {"type": "string"}, "workflow": {"type": "string"}, "status": {"type": "string"},
                 "started_at": _STRING_OR_NULL, "finished_at": _STRING_OR_NULL, "duration_ms": _NUMBER_OR_NULL,
                 "cost_usd": _NUMBER_OR_NULL})
RUN_LIST_SCHEMA = _obj({"runs": _array(_SUMMARY), "next_cursor": _STRING_OR_NULL}, ["runs"])
_INT_OR_NULL = {"type": ["integer", "null"]}
_ISSUES = _array(_obj({"code": {"type": "string"}, "message": {"type": "string"}, "node_id": _STRING_OR_NULL,
                       "field": _STRING_OR_NULL, "suggestion": _STRING_OR_NULL,
                       "path": {**_STRING_OR_NULL, "description": "JSON pointer: /nodes/2/code"},
                       "line": {**_INT_OR_NULL, "description": "1-based, in the text given"},
                       "column": _INT_OR_NULL}))
_REPORT_PROPERTIES: dict[str, Any] = {"ok": {"type": "boolean"}, "errors": _ISSUES, "warnings": _ISSUES,
                                      "estimate": _ANY_OBJECT}
REPORT_SCHEMA = _obj(_REPORT_PROPERTIES, ["ok", "errors", "warnings"])
REGISTERED_SCHEMA = _obj({"registered": {"type": "string"}, "tool": _STRING_OR_NULL, "uri": {"type": "string"},
                          **_REPORT_PROPERTIES}, description="With validate_only: the validation report")

_FIRES = _array(_obj({"at": {"type": "string"}, "local": {"type": "string"}}), "UTC and local times.")
SCHEDULE_SCHEMA = _obj({
    "id": {"type": "string"}, "workflow": _STRING_OR_NULL, "network": _STRING_OR_NULL,
    "inputs": {"type": ["object", "null"]}, "spec": _ANY_OBJECT, "policy": _ANY_OBJECT,
    "state": _ANY_OBJECT, "revision": {"type": "integer"}, "origin": _STRING_OR_NULL,
    "created_at": _STRING_OR_NULL, "updated_at": _STRING_OR_NULL, "next_fires": _FIRES,
    "counts": {"type": "object", "description": "Firings by outcome."},
    "firings": _array(_ANY_OBJECT, "schedule_get: the last 10 firings."),
    "scheduler_alive_at": _STRING_OR_NULL}, ["id"], "A schedule.")
SCHEDULE_PREVIEW_SCHEMA = _obj({"fires": _FIRES, "description": {"type": "string"},
                                "warnings": _array({"type": "string"}), "timezone": {"type": "string"}}, ["fires"])
SCHEDULE_LIST_SCHEMA = _obj({"schedules": _array(SCHEDULE_SCHEMA),
                             "scheduler_alive_at": {**_STRING_OR_NULL, "description": "When a server last ran the "
                                                    "firing loop on this store."}}, ["schedules"])
SCHEDULE_TRIGGER_SCHEMA = _obj({"schedule_id": {"type": "string"}, "slot": {"type": "string"},
                                "run_id": _STRING_OR_NULL})
SCHEDULE_BACKFILL_SCHEMA = _obj({"schedule_id": {"type": "string"}, "slots": {"type": "integer"},
                                 "later_slots": {"type": "integer"},
                                 "started": _array(_obj({"slot": {"type": "string"}, "run_id": _STRING_OR_NULL}))})
SCHEDULE_HISTORY_SCHEMA = _obj({"firings": _array(_obj({
    "slot": {"type": "string"}, "outcome": {"type": "string"}, "run_id": _STRING_OR_NULL,
    "fired_at": _STRING_OR_NULL, "replica": _STRING_OR_NULL, "count": {"type": ["integer", "null"]}}),
    "Newest first.")}, ["firings"])
DELETED_SCHEMA = _obj({"id": {"type": "string"}, "deleted": {"type": "boolean"}}, ["id", "deleted"])
HOOK_SCHEMA = _obj({
    "id": {"type": "string"}, "workflow": _STRING_OR_NULL, "network": _STRING_OR_NULL, "auth": {"type": "string"},
    "inputs": {"type": ["object", "null"]}, "body_input": _STRING_OR_NULL, "url": {"type": "string"},
    "created_at": _STRING_OR_NULL,
    "secrets": _array(_ANY_OBJECT, "Each secret's validity (never the secret)."),
    "secret": {"type": "string", "description": "The new secret (whsec_...): shown only in this answer."},
    "previous_valid_until": _STRING_OR_NULL}, ["id"], "A webhook.")
HOOK_LIST_SCHEMA = _obj({"hooks": _array(HOOK_SCHEMA)}, ["hooks"])
HOOK_TEST_SCHEMA = _obj({"verified": {"type": ["boolean", "null"]}, "delivery_id": _STRING_OR_NULL,
                         "inputs": {"type": ["object", "null"]},
                         "problems": _array(_obj({"path": _STRING_OR_NULL, "message": _STRING_OR_NULL}))})
TARGET_SCHEMA = _obj({
    "id": {"type": "string"}, "url": _STRING_OR_NULL, "workflow_target": _STRING_OR_NULL,
    "on": _array({"type": "string"}), "workflow": _STRING_OR_NULL, "schedule_id": _STRING_OR_NULL,
    "disabled": {"type": "boolean"}, "created_at": _STRING_OR_NULL,
    "secret": {"type": "string", "description": "Signs every delivery: shown only when set."}}, ["id"],
    "A notification target.")
TARGET_LIST_SCHEMA = _obj({"targets": _array(TARGET_SCHEMA)}, ["targets"])
DELIVERIES_SCHEMA = _obj({"deliveries": _array(_ANY_OBJECT, "Newest first: each event's state and attempts.")},
                         ["deliveries"])
