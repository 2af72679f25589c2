"""The built-in tools, one declaration each: name, schemas, annotations, scope, where else it is offered, handler.

The MCP catalogue lists every entry; `/rpc` offers those with an `rpc` method name and the command line those
with a `cli` path. A handler does the work through the orchestrator's API and answers with a reply the caller's
transport turns into its own shape: `Reply` (data as is), `RunStarted` (a run to follow: MCP relays progress and
may answer with a task, /rpc and the CLI wait for its envelope), `RunWatched`, `NetworkFollowed`. Adding a tool
is one entry in BUILTINS and one handler function.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ice_mcp.errors import IceError
from ice_mcp.network import NETWORK_ID_PREFIX, NetworkHandle
from ice_mcp.orchestrator import Orchestrator, RunHandle
from ice_mcp.server.protocol.documents import parse_document
from ice_mcp.server.protocol.runs import run_and_wait
from ice_mcp.store.events import Listener
from ice_mcp.store.records import RunRecord

if TYPE_CHECKING:
    from ice_mcp.server.protocol.catalogue import Catalogue

# What a caller must be allowed to do: read runs and the catalogue, start or steer runs, change the catalogue.
Scope = Literal["read", "run", "admin"]

_KEY = {"type": "string", "description": "Retrying with the same key attaches to the same run."}
MAX_WAIT_PARAM = 1e9  # seconds; larger is not a wait but an attack on float conversion
_WAIT = {
    "type": "number",
    "minimum": 0,
    "maximum": MAX_WAIT_PARAM,
    "description": "Seconds to wait for the run before answering `running` (the server may wait less).",
}
_BLUEPRINT = {
    "anyOf": [{"type": "object"}, {"type": "string"}],
    "description": "A blueprint: a JSON object, or JSON/YAML text (see the ice://docs/blueprint-format resource).",
}
_RUN_STATUSES = ["running", "succeeded", "failed", "cancelled", "timed_out", "over_budget", "input_required"]


def _obj(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


@dataclass(frozen=True, slots=True)
class Hints:
    """What a tool's MCP annotations tell a client: it only reads; it destroys; twice is as once; it reaches out."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


_READ = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)


# -- what a handler receives and answers ------------------------------------------------------------


@dataclass(slots=True)
class BuiltinCall:
    """One call of a built-in tool, its arguments already checked against the tool's input schema."""

    orc: Orchestrator
    args: dict[str, Any]
    key: str | None  # idempotency key, from the arguments or the request's _meta
    caller: str | None
    wait_budget: Callable[[Any], float]  # a requested wait_seconds -> the seconds this server will wait
    called_as: str  # transport and name, as an answer's `by` records it: "mcp:run_respond", "rpc:run.respond"
    catalogue: Catalogue | None = None  # the MCP catalogue, where there is one


@dataclass(frozen=True, slots=True)
class Reply:
    """Data answered as it is (`is_error`: a tool error the model can read)."""

    data: dict[str, Any]
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class RunStarted:
    """A run to start (or attach to) and follow up to `wait` seconds (None: the transport's default)."""

    start: Callable[[Listener | None], Awaitable[RunHandle]]
    total: int | None
    execution: str = "auto"
    wait: float | None = None


@dataclass(frozen=True, slots=True)
class RunWatched:
    """A run started before, followed until it ends, asks a person, or `wait` seconds pass."""

    handle: RunHandle
    wait: float


@dataclass(frozen=True, slots=True)
class RunAnswered:
    """A run as it stands (its envelope)."""

    record: RunRecord


@dataclass(frozen=True, slots=True)
class NetworkFollowed:
    """A network run followed up to `wait` seconds; `started` by this call (a task client gets a task for it,
    and a caller without an idempotency key who goes away takes it along) or found by its id."""

    handle: NetworkHandle
    wait: float
    started: bool = False
    key: str | None = None


Answer = Reply | RunStarted | RunWatched | RunAnswered | NetworkFollowed
Handler = Callable[[BuiltinCall], Awaitable[Answer]]


async def wait_for_network(answer: NetworkFollowed) -> dict[str, Any]:
    """A network's result once it ends or the wait is over; a caller without a key who goes away while
    waiting for a network it started takes it along."""
    try:
        return await answer.handle.wait(timeout=answer.wait)
    except asyncio.CancelledError:
        if answer.started and not answer.key:
            answer.handle.cancel()
        raise


async def settle(answer: Answer, default_wait: float) -> dict[str, Any]:
    """An answer as plain data, for callers that take no progress and no task (/rpc, the command line):
    a run's envelope once it ends or the wait is over (the caller's cancellation cancels a run it started)."""
    if isinstance(answer, Reply):
        return answer.data
    if isinstance(answer, RunStarted):
        wait = default_wait if answer.wait is None else answer.wait
        return (await run_and_wait(answer.start, wait_seconds=wait, progress=None, total=None)).envelope()
    if isinstance(answer, RunWatched):
        return (await answer.handle.wait(answer.wait, or_question=True)).envelope()
    if isinstance(answer, RunAnswered):
        return answer.record.envelope()
    return await wait_for_network(answer)


@dataclass(frozen=True, slots=True)
class BuiltinTool:
    """One built-in tool, declared once for MCP, /rpc and the command line."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: Hints
    handler: Handler
    scope: Scope = "read"
    output_schema: dict[str, Any] | None = None
    alias: str | None = None  # a second name MCP clients may call it by
    rpc: str | None = None  # its /rpc method
    cli: tuple[str, ...] | None = None  # its `ice-mcp` command

    @property
    def admin(self) -> bool:
        return self.scope == "admin"


# -- handlers ------------------------------------------------------------------------------------------


def _unknown_run(run_id: str) -> IceError:
    return IceError(f"unknown run {run_id!r}", code="unknown_run")


def _network(call: BuiltinCall) -> NetworkHandle | None:
    run_id = call.args["run_id"]
    return call.orc.get_network(run_id) if run_id.startswith(NETWORK_ID_PREFIX) else None


async def run_status(call: BuiltinCall) -> Answer:
    if (network := _network(call)) is not None:
        return Reply(network.result())
    record = call.orc.get_run(call.args["run_id"])
    if record is None:
        raise _unknown_run(call.args["run_id"])
    return Reply(record.to_dict())


async def run_result(call: BuiltinCall) -> Answer:
    wait = call.wait_budget(call.args.get("wait_seconds"))
    if (network := _network(call)) is not None:
        return NetworkFollowed(network, wait)
    handle = call.orc.watch(call.args["run_id"])  # here, or another process's run followed through the store
    if handle is None:
        raise _unknown_run(call.args["run_id"])
    return RunWatched(handle, wait)


async def run_cancel(call: BuiltinCall) -> Answer:
    run_id = call.args["run_id"]
    if (network := _network(call)) is not None:
        cancelled = network.cancel()
        await network.wait(timeout=call.wait_budget(None))
        return Reply({"run_id": network.network_id, "cancelled": cancelled, "status": network.status})
    if call.orc.get_run(run_id) is None:
        raise _unknown_run(run_id)
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
    runs = call.orc.list_runs(status=args.get("status"), workflow=args.get("workflow"),
                              limit=int(args.get("limit") or 50))
    return Reply({"runs": [run.summary() for run in runs]})


async def _checked(call: BuiltinCall) -> Any:
    # Parsing and compiling a large blueprint takes longer than an event-loop turn: a thread does it.
    return await asyncio.to_thread(lambda: call.orc.validate(parse_document(call.args["blueprint"])))


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


# -- the table -----------------------------------------------------------------------------------------

_RUN_ID = {"run_id": {"type": "string"}}
_CANCELLED = _obj({"run_id": {"type": "string"}, "cancelled": {"type": "boolean"}, "status": {"type": "string"}},
                  ["run_id", "cancelled", "status"])

BUILTINS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "run_status", "The record of a run: status, per-node states, outputs so far.",
        _obj(_RUN_ID, ["run_id"]), _READ, run_status, rpc="run.status", cli=("runs", "show")),
    BuiltinTool(
        "run_result", "Wait (up to wait_seconds) for a run to finish and return its result envelope.",
        _obj({**_RUN_ID, "wait_seconds": _WAIT}, ["run_id"]), _READ, run_result, rpc="run.result"),
    BuiltinTool(
        "run_cancel", "Cancel a running run and every node running in it.",
        _obj(_RUN_ID, ["run_id"]), Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        run_cancel, scope="run", output_schema=_CANCELLED, rpc="run.cancel", cli=("runs", "cancel")),
    BuiltinTool(
        "run_retry", "Run a finished run again as a new run: nodes it finished are reused, the failed node (or"
        " from_node) and everything after it run again.",
        _obj({**_RUN_ID, "from_node": {"type": "string", "description": "re-run from this top-level node"},
              "wait_seconds": _WAIT}, ["run_id"]),
        Hints(read_only=False, destructive=False, idempotent=False, open_world=True),
        run_retry, scope="run", rpc="run.retry", cli=("runs", "retry")),
    BuiltinTool(
        "run_respond", "Answer the question a waiting `human` node asked (run_status shows it under `questions`, "
        "with the schema the answer must fit; an approval is {approved, reason}). Returns the run as it stands "
        "after the answer (up to wait_seconds).",
        _obj({**_RUN_ID, "node": {"type": "string", "description": "the node's path, as run_status lists it"},
              "answer": {"type": "object", "description": "an object that fits the question's schema"},
              "wait_seconds": _WAIT}, ["run_id", "node", "answer"]),
        # Answering does not change the world by itself: the run's own nodes do (and are annotated).
        Hints(read_only=True, destructive=False, idempotent=False, open_world=False),
        run_respond, scope="run", rpc="run.respond"),
    BuiltinTool(
        "run_list", "Recent runs, newest first, optionally filtered by workflow and status.",
        _obj({"workflow": {"type": "string"}, "status": {"type": "string", "enum": _RUN_STATUSES},
              "limit": {"type": "integer", "minimum": 1, "maximum": 500}}),
        _READ, run_list, rpc="run.list", cli=("runs", "list")),
    BuiltinTool(
        "blueprint_validate", "Check a blueprint without running it: every problem with a suggestion, and a cost "
        "estimate.", _obj({"blueprint": _BLUEPRINT}, ["blueprint"]), _READ, blueprint_validate,
        rpc="blueprint.validate", cli=("validate",)),
    BuiltinTool(
        "blueprint_register", "Add or replace workflow_<name> from a blueprint (validate_only: just check it).",
        _obj({"blueprint": _BLUEPRINT, "validate_only": {"type": "boolean"}}, ["blueprint"]),
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        blueprint_register, scope="admin"),
    BuiltinTool(
        "blueprint_delete", "Remove a registered workflow (and its workflow_<name> tool).",
        _obj({"name": {"type": "string"}}, ["name"]),
        Hints(read_only=False, destructive=True, idempotent=True, open_world=False),
        blueprint_delete, scope="admin", output_schema=_obj({"deleted": {"type": "string"}}, ["deleted"])),
    BuiltinTool(
        "blueprint_run", "Run a blueprint given inline without registering it.",
        _obj({"blueprint": _BLUEPRINT, "inputs": {"type": "object"}, "idempotency_key": _KEY,
              "wait_seconds": _WAIT}, ["blueprint"]),
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        blueprint_run, scope="run", cli=("run",)),
    BuiltinTool(
        "network_execute", "Run a network manifest (several workflows with dependencies), given as YAML text or "
        "an object.",
        _obj({"manifest": {"anyOf": [{"type": "object"}, {"type": "string"}],
                           "description": "A network manifest (api_version: network.v0), as an object or YAML text"},
              "wait_seconds": _WAIT, "idempotency_key": _KEY}, ["manifest"]),
        Hints(read_only=False, destructive=True, idempotent=False, open_world=True),
        network_execute, scope="run", alias="network.execute", rpc="network.execute", cli=("network", "run")),
)

BY_NAME: dict[str, BuiltinTool] = {tool.name: tool for tool in BUILTINS}
ALIASES: dict[str, str] = {tool.alias: tool.name for tool in BUILTINS if tool.alias}
