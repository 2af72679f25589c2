"""The schedule tools: preview, create, read, change, pause, resume, trigger, backfill, delete and history.

Each is one `BuiltinTool` entry and one handler over the orchestrator's schedule desk (`orc.schedules`).
"""

from __future__ import annotations

from typing import Any

from ice_mcp.operations.result_schemas import (
    DELETED_SCHEMA,
    SCHEDULE_BACKFILL_SCHEMA,
    SCHEDULE_HISTORY_SCHEMA,
    SCHEDULE_LIST_SCHEMA,
    SCHEDULE_PREVIEW_SCHEMA,
    SCHEDULE_SCHEMA,
    SCHEDULE_TRIGGER_SCHEMA,
)
from ice_mcp.operations.tool_table import (
    DELETES,
    READ_ONLY,
    STARTS,
    Answer,
    BuiltinCall,
    BuiltinTool,
    Hints,
    Reply,
    obj_schema,
    replying,
)
from ice_mcp.store.schedules import OUTCOMES

_ID = {"type": "string", "description": "The schedule's id."}
_INSTANT = {"type": "string", "description": "An ISO 8601 time; without an offset it is UTC."}
SPEC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "When it fires: exactly one of cron, every_seconds or rrule, in `timezone` (IANA, default UTC).",
    "properties": {
        "cron": {"type": "string", "description": "Five fields: minute hour day-of-month month day-of-week."},
        "every_seconds": {"type": "number", "minimum": 1, "description": "An absolute interval."},
        "rrule": {"type": "string", "description": "An iCalendar rule, e.g. RRULE:FREQ=WEEKLY;BYDAY=MO;BYHOUR=9"},
        "timezone": {"type": "string", "description": "An IANA zone, e.g. Europe/Paris (default UTC)."},
        "start_at": _INSTANT,
        "end_at": _INSTANT,
        "jitter_seconds": {"type": "number", "minimum": 0,
                           "description": "A delay in [0, jitter] fixed per slot, never past the next slot."},
    },
    # "Exactly one of" is checked by parse_spec: a oneOf of bare `required`s fails ajv's strictRequired, and
    # OpenAI's strict schemas have no oneOf.
    "additionalProperties": False,
}
POLICY_SCHEMA: dict[str, Any] = {"description": "What overlapping and missed slots do, and pause on failure.", **obj_schema({
    "overlap": {"type": "string", "enum": ["skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other",
                                          "allow_all"],
                "description": "What a slot does while the schedule's previous run still runs (default skip)."},
    "catchup": obj_schema({
        "mode": {"type": "string", "enum": ["latest", "all", "none"],
                 "description": "Slots missed while no server ran: run the latest (default), all, or none."},
        "window_seconds": {"type": "number", "exclusiveMinimum": 0,
                           "description": "How late a missed slot may still run (default 86400)."},
        "max_runs": {"type": "integer", "minimum": 1, "description": "At most this many catch-up runs (default 10)."},
    }),
    "pause_on_failure": {"type": "boolean", "description": "Pause the schedule when one of its runs fails."},
})}
_CHANGES = Hints(read_only=False, destructive=False, idempotent=True, open_world=False)


async def _kept(call: BuiltinCall, answer: dict[str, Any]) -> Answer:
    """The answer once the change also reached Temporal's schedule (on the temporal engine)."""
    await call.orc.schedules.mirrored()
    return Reply(answer)


async def schedule_preview(call: BuiltinCall) -> Answer:
    args = call.args
    return Reply(call.orc.schedules.preview(args["spec"], int(args.get("count", 10)), args.get("from")))


async def schedule_create(call: BuiltinCall) -> Answer:
    args = call.args
    return await _kept(call, call.orc.schedules.create(
        workflow=args.get("workflow"), network=args.get("network"), inputs=args.get("inputs"), spec=args["spec"],
        policy=args.get("policy"), schedule_id=args.get("id")))


schedule_get = replying(lambda call: call.orc.schedules.get(call.args["id"]))
schedule_list = replying(lambda call: call.orc.schedules.list(call.args.get("workflow")))


async def schedule_update(call: BuiltinCall) -> Answer:
    args = call.args
    return await _kept(call, call.orc.schedules.update(args["id"], spec=args.get("spec"), policy=args.get("policy"),
                                                       inputs=args.get("inputs"), if_revision=args.get("if_revision")))


async def schedule_pause(call: BuiltinCall) -> Answer:
    return await _kept(call, call.orc.schedules.pause(call.args["id"], call.args.get("note")))


async def schedule_resume(call: BuiltinCall) -> Answer:
    return await _kept(call, call.orc.schedules.resume(call.args["id"], bool(call.args.get("catch_up", False))))


async def schedule_trigger(call: BuiltinCall) -> Answer:
    return Reply(await call.orc.schedules.trigger(call.args["id"]))


async def schedule_backfill(call: BuiltinCall) -> Answer:
    args = call.args
    return Reply(await call.orc.schedules.backfill(args["id"], args["start"], args["end"]))


async def schedule_delete(call: BuiltinCall) -> Answer:
    return await _kept(call, call.orc.schedules.delete(call.args["id"]))


schedule_history = replying(lambda call: call.orc.schedules.history(call.args["id"], int(call.args.get("limit", 50)),
                                                                     call.args.get("outcome")))


SCHEDULE_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "schedule_preview", "The next fires of a schedule spec, in UTC and local time, in words, with warnings "
        "(skipped or repeated local times, sub-minute intervals). Keeps nothing.",
        obj_schema({"spec": SPEC_SCHEMA, "count": {"type": "integer", "minimum": 1, "maximum": 100},
                    "from": {**_INSTANT, "description": "Fires after this time (default now)."}}, ["spec"]),
        READ_ONLY, schedule_preview, output_schema=SCHEDULE_PREVIEW_SCHEMA, rpc="schedule.preview"),
    BuiltinTool(
        "schedule_create", "Run a workflow (or a served network) on a schedule (cron, interval or RRULE, in a time "
        "zone). Returns the schedule with its id and next 3 fires. Each slot runs once, whichever server fires it.",
        obj_schema({"workflow": {"type": "string", "description": "The registered workflow to run (or network)."},
                    "network": {"type": "string", "description": "A network served from a folder's networks/, "
                                "by name, to run instead of a workflow; it takes no inputs."},
                    "inputs": {"type": "object", "description": "The workflow's inputs for every run."},
                    "spec": SPEC_SCHEMA, "policy": POLICY_SCHEMA,
                    "id": {**_ID, "description": "An id of your own (default: generated)."}}, ["spec"]),
        _CHANGES, schedule_create, scope="run", output_schema=SCHEDULE_SCHEMA, rpc="schedule.create",
        cli=("schedules", "create")),
    BuiltinTool(
        "schedule_get", "A schedule: spec, policy, inputs, state, revision, next 10 fires, last 10 firings, counts "
        "by outcome, and when a server last ran the firing loop on this store.",
        obj_schema({"id": _ID}, ["id"]), READ_ONLY, schedule_get, output_schema=SCHEDULE_SCHEMA, rpc="schedule.get",
        cli=("schedules", "show")),
    BuiltinTool(
        "schedule_list", "Every schedule (optionally of one workflow or network) with its next fires.",
        obj_schema({"workflow": {"type": "string", "description": "A workflow's or a network's name."}}), READ_ONLY, schedule_list,
        output_schema=SCHEDULE_LIST_SCHEMA, rpc="schedule.list",
        cli=("schedules", "list")),
    BuiltinTool(
        "schedule_update", "Change a schedule's spec, policy or inputs (if_revision: only if it is still that "
        "revision).",
        obj_schema({"id": _ID, "spec": SPEC_SCHEMA, "policy": POLICY_SCHEMA, "inputs": {"type": "object"},
                    "if_revision": {"type": "integer", "minimum": 1}}, ["id"]),
        _CHANGES, schedule_update, scope="run", output_schema=SCHEDULE_SCHEMA, rpc="schedule.update"),
    BuiltinTool(
        "schedule_pause", "Stop firing a schedule until it is resumed (note: why).",
        obj_schema({"id": _ID, "note": {"type": "string", "description": "Why it is paused, kept with it."}},
                   ["id"]), _CHANGES, schedule_pause, scope="run", rpc="schedule.pause", cli=("schedules", "pause"),
        output_schema=SCHEDULE_SCHEMA),
    BuiltinTool(
        "schedule_resume", "Fire a paused schedule again; catch_up runs the slots passed while paused as the "
        "catch-up policy says (default: they are recorded as paused, not run).",
        obj_schema({"id": _ID, "catch_up": {"type": "boolean", "description":
                                            "Run the slots passed while paused (default: record them as paused)."}},
                   ["id"]), _CHANGES, schedule_resume, scope="run", rpc="schedule.resume", cli=("schedules", "resume"),
        output_schema=SCHEDULE_SCHEMA),
    BuiltinTool(
        "schedule_trigger", "Run a schedule's workflow (or network) now, outside its slots.",
        obj_schema({"id": _ID}, ["id"]), STARTS, schedule_trigger, scope="run",
        output_schema=SCHEDULE_TRIGGER_SCHEMA, rpc="schedule.trigger",
        cli=("schedules", "trigger")),
    BuiltinTool(
        "schedule_backfill", "Run the slots between start and end (inclusive) that have no firing yet, up to the "
        "schedule's last decided slot (later ones it fires itself); `later_slots` counts those left.",
        obj_schema({"id": _ID, "start": _INSTANT, "end": _INSTANT}, ["id", "start", "end"]), STARTS,
        schedule_backfill, scope="run", output_schema=SCHEDULE_BACKFILL_SCHEMA, rpc="schedule.backfill"),
    BuiltinTool(
        "schedule_delete", "Delete a schedule and its history (its runs stay).",
        obj_schema({"id": _ID}, ["id"]), DELETES,
        schedule_delete, scope="run", output_schema=DELETED_SCHEMA, rpc="schedule.delete",
        cli=("schedules", "delete")),
    BuiltinTool(
        "schedule_history", "What became of a schedule's slots, newest first: started (with run_id), "
        "skipped_overlap, buffered, buffer_dropped, missed, paused or rate_limited (the workflow's limits turned it "
        "away); a stretch of slots may be one row with count.",
        obj_schema({"id": _ID, "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "outcome": {"type": "string", "enum": list(OUTCOMES)}}, ["id"]),
        READ_ONLY, schedule_history, output_schema=SCHEDULE_HISTORY_SCHEMA, rpc="schedule.history"),
)
