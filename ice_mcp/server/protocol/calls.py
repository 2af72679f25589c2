"""What each tool call does: translate MCP arguments to one orchestrator call, and its answer to a result."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from jsonschema import exceptions as js_exceptions

from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.errors import ArgumentsInvalid, IceError
from ice_mcp.network import NETWORK_ID_PREFIX, NetworkHandle
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.edges import lone_surrogate
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.catalogue import Catalogue, Entry
from ice_mcp.server.protocol.documents import parse_document
from ice_mcp.server.protocol.envelope import FAILED, error_result, json_result, run_result
from ice_mcp.server.protocol.follow import PLAIN, CallAnswer, CallWay, RunFollower
from ice_mcp.server.protocol.runs import Progress, RunLog
from ice_mcp.server.protocol.tasks import TaskView

logger = logging.getLogger(__name__)

IDEMPOTENCY_META_KEYS = ("idempotency_key", "io.ice_mcp/idempotency_key", "idempotencyKey")

_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """One validator per schema object (the built-in tools' schemas live as long as the process)."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_VALIDATORS) > 1024:
            _VALIDATORS.clear()
        found = _VALIDATORS[id(schema)] = (schema, schema_validator(schema))
    return found[1]


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Raise ArgumentsInvalid listing every problem (path: message)."""
    try:
        validator = _validator(schema)
        if validator.is_valid(arguments):
            return
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except (SchemaInvalid, js_exceptions.SchemaError, TypeError, ValueError, RecursionError):
        return  # a schema the validator cannot use: what runs checks its arguments itself
    problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message[:300]}"
                for e in errors[:20]]
    raise ArgumentsInvalid("; ".join(problems), problems)


class ToolCalls:
    def __init__(self, orc: Orchestrator, options: ServerOptions, catalogue: Catalogue) -> None:
        self._orc = orc
        self._options = options
        self._catalogue = catalogue
        self.view = TaskView(orc, options)

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    def wait_budget(self, requested: Any) -> float:
        if (
            isinstance(requested, int | float)
            and not isinstance(requested, bool)
            and requested >= 0
        ):
            # Compare before converting: float() of a huge integer overflows.
            return float(min(requested, self._options.max_wait_seconds))
        return self._options.wait_seconds

    def refusal(self, entry: Entry) -> str | None:
        """Why this server will not run `entry` (read-only: only tools whose readOnlyHint is true)."""
        if self._catalogue.allowed(entry):
            return None
        return f"{entry.name} may change data (its readOnlyHint is false) and the server is read-only"

    @staticmethod
    def _key(arguments: Mapping[str, Any], meta: Mapping[str, Any]) -> str | None:
        key = arguments.get("idempotency_key")
        if key is None:
            key = next((meta[k] for k in IDEMPOTENCY_META_KEYS if meta.get(k) is not None), None)
        return None if key is None else str(key)[:200]

    async def call(
        self,
        entry: Entry,
        arguments: dict[str, Any],
        *,
        meta: Mapping[str, Any],
        admin: bool,
        report: Progress | None,
        caller: str | None = None,
        log: RunLog | None = None,
        way: CallWay = PLAIN,
    ) -> CallAnswer:
        if (why := self.refusal(entry)) is not None:
            return error_result("forbidden", why)
        if (where := lone_surrogate(arguments)) is not None:
            return error_result(
                "invalid_arguments", f"{where}: a string holds a lone UTF-16 surrogate"
            )
        key = self._key(arguments, meta)
        orc = self._orc
        follow = RunFollower(orc, self._options, self.view, way, report, log)
        try:
            if way.request_state is not None and entry.kind in ("workflow", "tool", "agent"):
                return await follow.next_round(way.request_state)  # a later round of a multi-round call
            # Each kind's arguments are checked once: a workflow's by its inputs schema, a tool's by
            # the tool, an agent's by its one-node plan, a built-in's here against its schema.
            if entry.kind == "workflow":
                arguments.pop("idempotency_key", None)
                plan = orc.workflow_plan(entry.target)
                return await follow.start(
                    lambda on_event: orc.start(plan, arguments, idempotency_key=key, on_event=on_event,
                                               caller=caller),
                    total=len(plan.graph.nodes), execution=plan.blueprint.execution)
            if entry.kind == "tool":
                arguments.pop("idempotency_key", None)
                return await follow.start(
                    lambda on_event: orc.start_tool(entry.target, arguments, idempotency_key=key,
                                                    on_event=on_event, caller=caller),
                    total=1, tasks=False)  # one tool call: quick by nature, answered in the call
            if entry.kind == "agent":
                arguments.pop("idempotency_key", None)
                return await follow.start(
                    lambda on_event: orc.start_agent(entry.target, arguments, idempotency_key=key,
                                                     on_event=on_event, caller=caller),
                    total=1)
            check_arguments(entry.schema, arguments)
            return await self._builtin(entry, arguments, key, admin, follow, caller)
        except IceError as exc:
            return error_result(exc.code, self._message(entry, exc), exc.details)

    @staticmethod
    def _message(entry: Entry, exc: IceError) -> str:
        if isinstance(exc, ArgumentsInvalid):
            return f"invalid arguments for {entry.name}: {exc.message}"
        return exc.message

    # -- built-in tools -------------------------------------------------------------------

    async def _builtin(
        self,
        entry: Entry,
        args: dict[str, Any],
        key: str | None,
        admin: bool,
        follow: RunFollower,
        caller: str | None,
    ) -> CallAnswer:
        name = entry.target
        orc = self._orc
        if entry.admin and not admin:
            why = (
                "the server is read-only" if self._options.read_only else "it needs the admin token"
            )
            return error_result("forbidden", f"{name} changes the catalogue and {why}")
        if name in ("run_status", "run_result", "run_cancel") and args["run_id"].startswith(NETWORK_ID_PREFIX):
            return await self._network_tool(name, args)
        if name == "run_status":
            record = orc.get_run(args["run_id"])
            if record is None:
                return error_result("unknown_run", f"unknown run {args['run_id']!r}")
            return json_result(record.to_dict())
        if name == "run_result":
            return await self._run_result(args["run_id"], args.get("wait_seconds"), follow)
        if name == "run_cancel":
            cancelled = await orc.cancel(args["run_id"])
            record = orc.get_run(args["run_id"])
            if record is None:
                return error_result("unknown_run", f"unknown run {args['run_id']!r}")
            return json_result({"run_id": args["run_id"], "cancelled": bool(cancelled), "status": record.status})
        if name == "run_retry":
            return await follow.start(
                lambda on_event: orc.retry(args["run_id"], args.get("from_node"), on_event=on_event, caller=caller),
                total=None, wait=self.wait_budget(args.get("wait_seconds")))
        if name == "run_respond":
            return await self._respond(args["run_id"], args["node"], args["answer"], args.get("wait_seconds"),
                                       "mcp:run_respond")
        if name == "run_list":
            runs = orc.list_runs(
                status=args.get("status"),
                workflow=args.get("workflow"),
                limit=int(args.get("limit") or 50),
            )
            return json_result({"runs": [run.summary() for run in runs]})
        # Parsing and compiling a large blueprint takes longer than an event-loop turn: a thread does it.
        if name == "blueprint_validate" or (name == "blueprint_register" and args.get("validate_only")):
            report_ = await asyncio.to_thread(lambda: orc.validate(parse_document(args["blueprint"])))
            return json_result(report_.model_dump(mode="json"), is_error=name != "blueprint_validate" and not report_.ok)
        if name == "blueprint_register":
            plan = await asyncio.to_thread(lambda: orc.compile(parse_document(args["blueprint"])).prepare())
            bp = orc.register_blueprint(plan)
            tool = self._catalogue.resolve(f"workflow:{bp.name}")
            return json_result(
                {
                    "registered": bp.name,
                    "tool": tool.name if tool else None,
                    "uri": f"ice://workflows/{bp.name}",
                }
            )
        if name == "blueprint_delete":
            removed = orc.remove_workflow(args["name"])
            if not removed:
                return error_result("unknown_workflow", f"unknown workflow {args['name']!r}")
            return json_result({"deleted": args["name"]})
        if name == "blueprint_run":
            plan = await asyncio.to_thread(lambda: orc.compile(parse_document(args["blueprint"])).prepare())
            inputs = dict(args.get("inputs") or {})
            return await follow.start(
                lambda on_event: orc.start(plan, inputs, idempotency_key=key, on_event=on_event, caller=caller),
                total=len(plan.graph.nodes) or None, execution=plan.blueprint.execution,
                wait=self.wait_budget(args.get("wait_seconds")))
        if name == "network_execute":
            if follow.way.tasks:
                handle = self.start_network(args["manifest"], key, caller)
                if (task := await follow.network(handle)) is not None:
                    return task
            result = await self.network(args["manifest"], args.get("wait_seconds"), key, caller)
            return network_result(result)
        return error_result("unknown_tool", f"unknown tool {name!r}")

    async def _respond(self, run_id: str, node: str, answer: Any, wait: Any, by: str) -> types.CallToolResult:
        """Answer a question, then the run as it stands once it ends, asks again, or the budget is over."""
        record = await self._orc.respond(run_id, node, answer, by=by)
        handle = self._orc.watch(run_id)  # here, or followed through the store
        if handle is not None:
            record = await handle.wait(self.wait_budget(wait), or_question=True)
        return run_result(record)

    async def respond(self, run_id: str, node: str, answer: Any, wait: Any, by: str) -> dict[str, Any]:
        """`_respond` for /rpc: the envelope."""
        result = await self._respond(run_id, node, answer, wait, by)
        return dict(result.structured_content or {})

    async def _run_result(self, run_id: str, wait: Any, follow: RunFollower) -> types.CallToolResult:
        """Wait for a run wherever it runs (here, or another process on the store); a question for a person
        ends the wait too (the caller must ask them)."""
        handle = self._orc.watch(run_id)
        if handle is None:
            return error_result("unknown_run", f"unknown run {run_id!r}")
        return run_result(await follow.watch(handle, self.wait_budget(wait)))

    async def _network_tool(self, name: str, args: dict[str, Any]) -> types.CallToolResult:
        """run_status, run_result and run_cancel of a network run (its id starts with `net_`)."""
        handle = self._orc.get_network(args["run_id"])
        if handle is None:
            return error_result("unknown_run", f"unknown network run {args['run_id']!r}")
        if name == "run_cancel":
            cancelled = handle.cancel()
            await handle.wait(timeout=self._options.wait_seconds)
            return json_result({"run_id": handle.network_id, "cancelled": cancelled, "status": handle.status})
        if name == "run_result":
            return network_result(await handle.wait(timeout=self.wait_budget(args.get("wait_seconds"))))
        return json_result(handle.result())

    def start_network(self, manifest: Any, key: str | None, caller: str | None) -> NetworkHandle:
        """Start a network run, or find the one `key` started; raises IceError (read-only server, bad manifest)."""
        if self._options.read_only:
            raise IceError(
                "network.execute runs workflows that may change data and the server is read-only",
                code="forbidden",
            )
        doc = parse_document(manifest, "manifest")
        return self._orc.start_network(doc, from_client=True, idempotency_key=key, caller=caller)

    async def network(self, manifest: Any, wait: Any, key: str | None, caller: str | None = None
                      ) -> dict[str, Any]:
        """Start a network run (or attach to the one `key` started) and wait up to the budget; a caller
        without a key that goes away takes its network with it."""
        handle = self.start_network(manifest, key, caller)
        try:
            return await handle.wait(timeout=self.wait_budget(wait))
        except asyncio.CancelledError:
            if not key:
                handle.cancel()
            raise


def network_result(result: dict[str, Any]) -> types.CallToolResult:
    """A network's result as a tool result; still running, it says how to follow it."""
    answer = json_result(result, is_error=result.get("status") in FAILED)
    if result.get("status") == "running":
        answer.content.append(types.TextContent(
            type="text", text=f"Network {result.get('network_id')} is still running; call "
                              f"run_result(run_id={result.get('network_id')!r}) to wait for it."))
    return answer
