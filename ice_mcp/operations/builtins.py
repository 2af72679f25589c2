"""The built-in tools, one declaration each: name, schemas, annotations, scope, where else it is offered, handler.

The MCP catalogue lists every entry; `/rpc` offers those with an `rpc` method name and the command line those
with a `cli` path. A handler does the work through the orchestrator's API and answers with a reply the caller's
transport turns into its own shape (`tool_table.py`: `Reply`, `RunStarted`, `RunWatched`, `NetworkFollowed`).
Adding a tool is one entry in BUILTINS (or in a family's own table, as `schedule_tools.py`) and one handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import Any

from ice_mcp.blueprint.pinning import pin
from ice_mcp.errors import IceError
from ice_mcp.network import NETWORK_ID_PREFIX, NetworkHandle
from ice_mcp.operations.blueprint_tools import BLUEPRINT_TOOLS
from ice_mcp.operations.documents import parse_document
from ice_mcp.operations.draft_tools import DRAFT_TOOLS
from ice_mcp.operations.eval_tools import EVAL_TOOLS
from ice_mcp.operations.hook_tools import HOOK_TOOLS
from ice_mcp.operations.notify_tools import NOTIFY_TOOLS
from ice_mcp.operations.result_schemas import (
    ENVELOPE_SCHEMA,
    NETWORK_SCHEMA,
    RECORD_SCHEMA,
    REGISTERED_SCHEMA,
    REPORT_SCHEMA,
    RUN_LIST_SCHEMA,
    RUN_OR_NETWORK_SCHEMA,
)
from ice_mcp.operations.run_changes import FOLLOW_PROPERTIES, following
from ice_mcp.operations.run_ids import resolve_run_id
from ice_mcp.operations.schedule_tools import SCHEDULE_TOOLS
from ice_mcp.operations.tool_table import (
    BLUEPRINT_SCHEMA,
    DELETES,
    KEY_SCHEMA,
    READ_ONLY,
    RUN_STATUSES,
    STARTS,
    WAIT_SCHEMA,
    Answer,
    BuiltinCall,
    BuiltinTool,
    Hints,
    NetworkFollowed,
    Reply,
    RunAnswered,
    RunStarted,
    RunWatched,
    obj_schema,
)
from ice_mcp.principals import everyone

# -- handlers ------------------------------------------------------------------------------------------


def _unknown_run(run_id: str) -> IceError:
    return IceError(f"unknown run {run_id!r}", code="unknown_run")


def _network(call: BuiltinCall) -> NetworkHandle | None:
    run_id = call.args["run_id"]
    return call.orc.get_network(run_id) if run_id.startswith(NETWORK_ID_PREFIX) else None


async def run_status(call: BuiltinCall) -> Answer:
    if call.args["run_id"].startswith(NETWORK_ID_PREFIX) and (
            network := call.orc.network_status(call.args["run_id"])) is not None:
        return Reply(network)  # here, or another process's as the store keeps it
    record = call.orc.get_run(call.args["run_id"])
    if record is None:  # a short id, as run lists show it (or unknown_run, ambiguous_run_id)
        record = call.orc.get_run(resolve_run_id(call.orc, call.args["run_id"]))
    if record is None:
        raise _unknown_run(call.args["run_id"])
    return Reply(record.to_dict())


async def run_result(call: BuiltinCall) -> Answer:
    wait = call.wait_budget(call.args.get("wait_seconds"))
    if (network := _network(call)) is not None:
        return NetworkFollowed(network, wait)
    handle = call.orc.watch(call.args["run_id"])  # here, or another process's run followed through the store
    if handle is None:  # a short id, as run lists show it
        handle = call.orc.watch(resolve_run_id(call.orc, call.args["run_id"]))
    if handle is None:
        raise _unknown_run(call.args["run_id"])
    return RunWatched(handle, wait)


async def run_cancel(call: BuiltinCall) -> Answer:
    run_id = call.args["run_id"]
    if (network := _network(call)) is not None:
        cancelled = network.cancel()
        await network.wait(timeout=call.wait_budget(None))
        return Reply({"run_id": network.network_id, "cancelled": cancelled, "status": network.status})
    run_id = resolve_run_id(call.orc, run_id)  # the id, or a unique start of it (unknown_run, ambiguous_run_id)
    cancelled = await call.orc.cancel(run_id)
    record = call.orc.get_run(run_id)
    return Reply({"run_id": run_id, "cancelled": bool(cancelled), "status": record.status if record else "unknown"})


async def run_retry(call: BuiltinCall) -> Answer:
    args, orc = call.args, call.orc
    return RunStarted(lambda on_event: orc.retry(args["run_id"], args.get("from_node"), on_event=on_event,
                                                 caller=call.caller),
                      total=None, wait=call.wait_budget(args.get("wait_seconds")))


async def run_respond(call: BuiltinCall) -> Answer:
    """Answer a question, then the run as it stands once it ends, asks again, or the budget is over."""
    args = call.args
    record = await call.orc.respond(args["run_id"], args["node"], args["answer"], by=call.called_as)
    handle = call.orc.watch(args["run_id"])  # here, or followed through the store
    if handle is None:
        return RunAnswered(record)
    return RunWatched(handle, call.wait_budget(args.get("wait_seconds")))


async def run_list(call: BuiltinCall) -> Answer:
    args = call.args
    limit = int(args.get("limit") or 50)
    try:
        with everyone() if args.get("all_principals") else contextlib.nullcontext():
            if args.get("schedule_id") is not None:
                runs = call.orc.list_runs(status=args.get("status"), workflow=args.get("workflow"), limit=limit,
                                          schedule_id=args["schedule_id"])
                return Reply({"runs": [run.summary() for run in runs], "next_cursor": None})
            rows, cursor = await asyncio.to_thread(
                call.orc.runs_page, status=args.get("status"), workflow=args.get("workflow"),
                trigger=args.get("trigger"), limit=limit, cursor=args.get("cursor"))
    except PermissionError as exc:
        raise IceError(str(exc), code="forbidden") from None
    return Reply({"runs": rows, "next_cursor": cursor})


DURATION_PATTERN = r"^\s*(\d+(?:\.\d+)?)\s*([smhdwSMHDW])\s*$"  # runs_prune's schema and its parser
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


async def runs_prune(call: BuiltinCall) -> Answer:
    found = re.match(DURATION_PATTERN, str(call.args["older_than"]))
    if found is None:
        raise IceError("older_than: a duration like 30d, 12h, 90m or 3600s", code="invalid_arguments")
    seconds = float(found.group(1)) * UNIT_SECONDS[found.group(2).lower()]
    pruned = await asyncio.to_thread(call.orc.prune_runs, seconds)
    return Reply({"pruned": pruned, "older_than_seconds": seconds})


async def ui_link(call: BuiltinCall) -> Answer:
    if call.ui_link is None:
        raise IceError("the run view is served by `ice-mcp serve --http` (or `ice-mcp ui`)", code="unavailable")
    return Reply(call.ui_link())


async def _checked(call: BuiltinCall) -> Any:
    # Parsing and compiling a large blueprint takes longer than an event-loop turn: a thread does it.
    blueprint = call.args["blueprint"]
    report = await asyncio.to_thread(lambda: call.orc.validate(parse_document(blueprint)))
    return pin(report, blueprint) if isinstance(blueprint, str) else report  # issues' lines in the text


async def blueprint_validate(call: BuiltinCall) -> Answer:
    return Reply((await _checked(call)).model_dump(mode="json"))


async def blueprint_register(call: BuiltinCall) -> Answer:
    orc = call.orc
    if call.args.get("validate_only"):
        report = await _checked(call)
        return Reply(report.model_dump(mode="json"), is_error=not report.ok)
    plan = await asyncio.to_thread(lambda: orc.compile(parse_document(call.args["blueprint"])).prepare())
    blueprint = orc.register_blueprint(plan)
    tool = call.catalogue.resolve(f"workflow:{blueprint.name}") if call.catalogue is not None else None
    return Reply({"registered": blueprint.name, "tool": tool.name if tool else None,
                  "uri": f"ice://workflows/{blueprint.name}"})


async def blueprint_delete(call: BuiltinCall) -> Answer:
    name = call.args["name"]
    if not call.orc.remove_workflow(name):
        raise IceError(f"unknown workflow {name!r}", code="unknown_workflow")
    return Reply({"deleted": name})


async def blueprint_run(call: BuiltinCall) -> Answer:
    orc, args = call.orc, call.args
    plan = await asyncio.to_thread(lambda: orc.compile(parse_document(args["blueprint"])).prepare())
    inputs = dict(args.get("inputs") or {})
    return RunStarted(lambda on_event: orc.start(plan, inputs, idempotency_key=call.key, on_event=on_event,
                                                 caller=call.caller),
                      total=len(plan.graph.nodes) or None, execution=plan.blueprint.execution,
                      wait=call.wait_budget(args.get("wait_seconds")))


async def network_execute(call: BuiltinCall) -> Answer:
    doc = parse_document(call.args["manifest"], "manifest")
    handle = call.orc.start_network(doc, from_client=True, idempotency_key=call.key, caller=call.caller)
    return NetworkFollowed(handle, call.wait_budget(call.args.get("wait_seconds")), started=True, key=call.key)


WORKFLOW_SEARCH = "workflow_search"
WORKFLOW_START = "workflow_start"
SEARCH_LIMIT = 10
# What a workflow's own tool answers, whichever workflow it is (its outputs are known only at call time).
STARTED_SCHEMA = ENVELOPE_SCHEMA


async def workflow_search(call: BuiltinCall) -> Answer:
    if call.catalogue is None:
        raise IceError(f"{WORKFLOW_SEARCH} is an MCP tool", code="unavailable")
    limit = int(call.args.get("limit") or 5)
    return Reply({"results": call.catalogue.search(call.args["query"], limit)})


async def workflow_start(call: BuiltinCall) -> Answer:
    # Never reached over MCP: server/protocol/calls.py makes it the workflow's own call first.
    raise IceError(f"{WORKFLOW_START} is an MCP tool", code="unavailable")


# -- the table -----------------------------------------------------------------------------------------

_RUN_ID = {"run_id": {"type": "string"}}
_CANCELLED = obj_schema({"run_id": {"type": "string"}, "cancelled": {"type": "boolean"}, "status": {"type": "string"}},
                  ["run_id", "cancelled", "status"])

BUILTINS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "run_status", "The record of a run: status, per-node states, outputs so far (with `seen`: only what "
        "changed since that answer; with `node`: one node's detail).",
        obj_schema({**_RUN_ID, **FOLLOW_PROPERTIES}, ["run_id"]), READ_ONLY, following(run_status), rpc="run.status",
        cli=("runs", "show"), output_schema=RECORD_SCHEMA),
    BuiltinTool(
        "run_result", "Wait (up to wait_seconds) for a run to finish and return its result envelope.",
        obj_schema({**_RUN_ID, "wait_seconds": WAIT_SCHEMA}, ["run_id"]), READ_ONLY, run_result, rpc="run.result",
        output_schema=RUN_OR_NETWORK_SCHEMA),
    BuiltinTool(
        "run_cancel", "Cancel a running run and every node running in it.",
        obj_schema(_RUN_ID, ["run_id"]), DELETES,
        run_cancel, scope="run", output_schema=_CANCELLED, rpc="run.cancel", cli=("runs", "cancel")),
    BuiltinTool(
        "run_retry", "Run a finished run again as a new run: nodes it finished are reused, the failed node (or"
        " from_node) and everything after it run again.",
        obj_schema({**_RUN_ID, "from_node": {"type": "string", "description": "re-run from this top-level node"},
              "wait_seconds": WAIT_SCHEMA}, ["run_id"]),
        STARTS,
        run_retry, scope="run", output_schema=ENVELOPE_SCHEMA, rpc="run.retry", cli=("runs", "retry")),
    BuiltinTool(
        "run_respond", "Answer the question a waiting `human` node asked (run_status shows it under `questions`, "
        "with the schema the answer must fit; an approval is {approved, reason}). Returns the run as it stands "
        "after the answer (up to wait_seconds).",
        obj_schema({**_RUN_ID, "node": {"type": "string", "description": "the node's path, as run_status lists it"},
              "answer": {"type": "object", "description": "an object that fits the question's schema"},
              "wait_seconds": WAIT_SCHEMA}, ["run_id", "node", "answer"]),
        # Answering does not change the world by itself: the run's own nodes do (and are annotated).
        Hints(read_only=True, destructive=False, idempotent=False, open_world=False),
        run_respond, scope="run", output_schema=ENVELOPE_SCHEMA, rpc="run.respond"),
    BuiltinTool(
        "run_list", "Recent runs, newest first, optionally filtered by workflow, status, trigger and the schedule "
        "that started them; pass next_cursor back as cursor for the next page.",
        obj_schema({"workflow": {"type": "string"}, "status": {"type": "string", "enum": RUN_STATUSES},
                    "schedule_id": {"type": "string"},
                    "trigger": {"type": "string", "description": "what started them: call, schedule, webhook, "
                                "notification"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 500},
                    "cursor": {"type": "string", "description": "the next_cursor of the page before"},
                    "all_principals": {"type": "boolean", "description": "with OAuth, an admin (ice:admin) lists "
                                       "every user's runs, not only its own (logged)"}}),
        READ_ONLY, run_list, output_schema=RUN_LIST_SCHEMA, rpc="run.list", cli=("runs", "list")),
    BuiltinTool(
        "runs_prune", "Delete the runs that ended longer ago than `older_than` (30d, 12h, 90m, 3600s), with their "
        "journals; a run under way or waiting is never touched. ICE_MCP_RETENTION_DAYS does this every hour.",
        obj_schema({"older_than": {"type": "string", "pattern": DURATION_PATTERN,
                                   "description": "how long ago a run ended, at least: 30d, 12h, 90m, 3600s"}},
                   ["older_than"]),
        DELETES, runs_prune, scope="admin",
        output_schema=obj_schema({"pruned": {"type": "integer"}, "older_than_seconds": {"type": "number"}},
                                 ["pruned", "older_than_seconds"]),
        cli=("runs", "prune"), cli_flags=("older_than",)),
    BuiltinTool(
        "ui_link", "A link that opens the live run view (/ui) in a browser. With OAuth it signs the browser in as "
        "you: it works once, within 60 seconds; give it to the user to open.",
        obj_schema({}), READ_ONLY, ui_link,
        output_schema=obj_schema({"url": {"type": "string"},
                                  "expires_in_seconds": {"type": ["integer", "null"]}}, ["url"])),
    BuiltinTool(
        "blueprint_validate", "Check a blueprint without running it: every problem with a suggestion, and a cost "
        "estimate.", obj_schema({"blueprint": BLUEPRINT_SCHEMA}, ["blueprint"]), READ_ONLY, blueprint_validate,
        output_schema=REPORT_SCHEMA, rpc="blueprint.validate", cli=("validate",)),
    BuiltinTool(
        "blueprint_register", "Add or replace workflow_<name> from a blueprint (validate_only: just check it).",
        obj_schema({"blueprint": BLUEPRINT_SCHEMA, "validate_only": {"type": "boolean"}}, ["blueprint"]),
        DELETES,
        blueprint_register, scope="admin", output_schema=REGISTERED_SCHEMA),
    BuiltinTool(
        "blueprint_delete", "Remove a registered workflow (and its workflow_<name> tool).",
        obj_schema({"name": {"type": "string"}}, ["name"]),
        DELETES,
        blueprint_delete, scope="admin", output_schema=obj_schema({"deleted": {"type": "string"}}, ["deleted"])),
    BuiltinTool(
        "blueprint_run", "Run a blueprint given inline without registering it.",
        obj_schema({"blueprint": BLUEPRINT_SCHEMA, "inputs": {"type": "object"}, "idempotency_key": KEY_SCHEMA,
              "wait_seconds": WAIT_SCHEMA}, ["blueprint"]),
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        blueprint_run, scope="run", output_schema=ENVELOPE_SCHEMA, cli=("run",), shows_run=True),
    BuiltinTool(
        "network_execute", "Run a network manifest (several workflows with dependencies), given as YAML text or "
        "an object.",
        obj_schema({"manifest": {"anyOf": [{"type": "object"}, {"type": "string"}],
                           "description": "A network manifest (api_version: network.v0), as an object or YAML text"},
              "wait_seconds": WAIT_SCHEMA, "idempotency_key": KEY_SCHEMA}, ["manifest"]),
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        network_execute, scope="run", output_schema=NETWORK_SCHEMA, alias="network.execute", rpc="network.execute",
        cli=("network", "run"), shows_run=True),
    BuiltinTool(
        WORKFLOW_SEARCH, "Find registered workflows by what they do, when there are more than the tool list shows: "
        "the best matches over names, descriptions, input names and tags, each with its inputs schema. Run one "
        "with workflow_start (or its own tool).",
        obj_schema({"query": {"type": "string", "minLength": 1, "maxLength": 1000,
                              "description": "what the workflow should do, in plain words"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT,
                              "description": "how many results (default 5)"}}, ["query"]),
        READ_ONLY, workflow_search,
        output_schema=obj_schema({"results": {"type": "array", "description": "best first", "items": obj_schema({
            "name": {"type": "string", "description": "the workflow's name, for workflow_start"},
            "description": {"type": "string"},
            "score": {"type": "number", "description": "relevance (BM25): higher is better"},
            "tool": {"type": "string", "description": "its own tool, callable by this name"},
            "inputs": {"type": "object", "description": "the JSON Schema its inputs must fit"}},
            ["name", "description", "score", "tool", "inputs"])}}, ["results"])),
    BuiltinTool(
        WORKFLOW_START, "Run a registered workflow by name (workflow_search finds it), also one registered after "
        "the tool list was read: the same run, result envelope, progress and task as calling its own tool.",
        obj_schema({"name": {"type": "string", "minLength": 1,
                             "description": "the workflow's name, as workflow_search answers it"},
                    "inputs": {"type": "object", "description": "the workflow's inputs: an object that fits the "
                               "inputs schema workflow_search answers"},
                    "wait_seconds": WAIT_SCHEMA, "idempotency_key": KEY_SCHEMA}, ["name", "inputs"]),
        # What it runs is known only at call time: the hints are those of the most a workflow may do.
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        workflow_start, scope="run", output_schema=STARTED_SCHEMA, forwards_to_workflow=True, shows_run=True),
    *DRAFT_TOOLS,
    *SCHEDULE_TOOLS,
    *HOOK_TOOLS,
    *NOTIFY_TOOLS,
    *EVAL_TOOLS,
    *BLUEPRINT_TOOLS,
)

BY_NAME: dict[str, BuiltinTool] = {tool.name: tool for tool in BUILTINS}
ALIASES: dict[str, str] = {tool.alias: tool.name for tool in BUILTINS if tool.alias}
