"""The notification tools: set a target for a workflow's (or a schedule's) finished runs, list, delete, history.

Each is one `BuiltinTool` entry and one handler over the orchestrator's notification desk (`orc.notifications`).
"""

from __future__ import annotations

from typing import Any

from ice_mcp.notify.desk import ON
from ice_mcp.operations.result_schemas import (
    DELETED_SCHEMA,
    DELIVERIES_SCHEMA,
    TARGET_LIST_SCHEMA,
    TARGET_SCHEMA,
)
from ice_mcp.operations.tool_table import (
    DELETES,
    READ_ONLY,
    STARTS,
    BuiltinCall,
    BuiltinTool,
    obj_schema,
    replying,
)

_ID = {"type": "string", "description": "The notification target's id."}


def _set(call: BuiltinCall) -> dict[str, Any]:
    args = call.args
    return call.orc.notifications.set(url=args.get("url"), workflow=args.get("workflow"),
                                      schedule_id=args.get("schedule_id"), on=args.get("on", ["failed"]),
                                      secret=args.get("secret"), target_id=args.get("id"),
                                      workflow_target=args.get("workflow_target"))


notify_set = replying(_set)
notify_list = replying(lambda call: call.orc.notifications.list())
notify_delete = replying(lambda call: call.orc.notifications.delete(call.args["id"]))
notify_history = replying(lambda call: call.orc.notifications.history(call.args["id"], int(call.args.get("limit", 50))))


NOTIFY_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "notify_set", "POST a signed event (Standard Webhooks) to a URL when a workflow's runs, or the runs a "
        "schedule starts, end as listed in `on` (or start workflow_target with it as inputs): {type: run.succeeded | run.failed | run.canceled, timestamp, "
        "data: {run_id, workflow, status, error, outputs, trigger}}, retried with backoff until a 2xx. Returns "
        "{id, secret}: the secret signs every delivery and is shown only here.",
        obj_schema({"url": {"type": "string", "description": "Where events are POSTed (http or https)."},
                    "workflow_target": {"type": "string", "description":
                                        "Instead of a URL: a workflow started with the event as its inputs."},
                    "workflow": {"type": "string", "description": "Whose runs: this workflow's."},
                    "schedule_id": {"type": "string", "description": "Whose runs: the ones this schedule starts."},
                    "on": {"type": "array", "items": {"type": "string", "enum": list(ON)}, "minItems": 1,
                           "description": "Which endings are sent (default [\"failed\"])."},
                    "secret": {"type": "string", "description": "Your own whsec_ secret (default: a new one)."},
                    "id": {**_ID, "description": "An id of your own (default: generated)."}}),
        STARTS, notify_set, scope="run",
        output_schema=TARGET_SCHEMA, rpc="notify.set", cli=("notify", "set")),
    BuiltinTool("notify_list", "Every notification target (never its secret).", obj_schema({}), READ_ONLY,
                notify_list, output_schema=TARGET_LIST_SCHEMA, rpc="notify.list", cli=("notify", "list")),
    BuiltinTool("notify_delete", "Stop sending to a target and forget its deliveries.", obj_schema({"id": _ID}, ["id"]),
                DELETES, notify_delete,
                scope="run", output_schema=DELETED_SCHEMA, rpc="notify.delete", cli=("notify", "delete")),
    BuiltinTool("notify_history", "A target's deliveries, newest first: each event's state (pending, delivered, "
                "failed, disabled) and every attempt (time, HTTP status or error, server).",
                obj_schema({"id": _ID, "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description":
                                                 "At most this many deliveries, newest first (default 50)."}},
                           ["id"]),
                READ_ONLY, notify_history, output_schema=DELIVERIES_SCHEMA, rpc="notify.history",
                cli=("notify", "history")),
)
