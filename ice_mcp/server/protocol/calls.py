"""What each tool call does: translate MCP arguments to one orchestrator call, and its answer to a result."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types

from ice_mcp.errors import ArgumentsInvalid, IceError
from ice_mcp.operations.arguments import check_arguments
from ice_mcp.operations.builtins import BY_NAME
from ice_mcp.operations.run_relay import Progress, RunLog
from ice_mcp.operations.tool_table import (
    BuiltinCall,
    BuiltinTool,
    Reply,
    RunAnswered,
    RunStarted,
    RunWatched,
    settle,
    wait_for_network,
)
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.catalogue import Catalogue, Entry
from ice_mcp.server.protocol.envelope import FAILED, error_result, json_result
from ice_mcp.server.protocol.follow import PLAIN, CallAnswer, CallWay, RunFollower
from ice_mcp.server.protocol.strict import read_strict
from ice_mcp.server.protocol.tasks import TaskView
from ice_mcp.server.untrusted import lone_surrogate

logger = logging.getLogger(__name__)

IDEMPOTENCY_META_KEYS = ("idempotency_key", "io.ice_mcp/idempotency_key", "idempotencyKey")

class ToolCalls:
    def __init__(self, orc: Orchestrator, options: ServerOptions, catalogue: Catalogue) -> None:
        self._orc = orc
        self._options = options
        self._catalogue = catalogue
        self.view = TaskView(orc, options)
        self.ui_link: Callable[[], dict[str, Any]] | None = None  # set by the HTTP app, which serves /ui

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

    def run_view_url(self, run_id: str) -> str | None:
        """Where a browser watches a run: the run view this HTTP server serves (None over stdio)."""
        base = self._orc.hooks.base_url
        return f"{base}/ui/#/runs/{run_id}" if self.ui_link is not None and base else None

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
        wait: float | None = None  # the transport's default
        # What an OpenAI-strict caller sends: null for "not given", JSON text for a free-form object (strict.py).
        arguments = read_strict(entry.schema, arguments)
        if entry.forwards_to_workflow:
            try:  # from here on it is the workflow's own call: same checks, run, progress, task and result
                entry, arguments, wait = self._started(entry, arguments)
                arguments = read_strict(entry.schema, arguments)
            except IceError as exc:
                return error_result(exc.code, self._message(entry, exc), exc.details)
        if (why := self.refusal(entry)) is not None:
            return error_result("forbidden", why)
        if (where := lone_surrogate(arguments)) is not None:
            return error_result(
                "invalid_arguments", f"{where}: a string holds a lone UTF-16 surrogate"
            )
        key = self._key(arguments, meta)
        orc = self._orc
        follow = RunFollower(orc, self._options, self.view, way, report, log, self.run_view_url)
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
                    total=len(plan.graph.nodes), execution=plan.blueprint.execution, wait=wait)
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

    def _started(self, entry: Entry, arguments: dict[str, Any]) -> tuple[Entry, dict[str, Any], float | None]:
        """workflow_start(name, inputs, wait_seconds?, idempotency_key?) as the call of that workflow's tool."""
        check_arguments(entry.schema, arguments)
        inputs = dict(arguments["inputs"])
        if "idempotency_key" in arguments:  # where the workflow's own tool takes it too
            inputs["idempotency_key"] = arguments["idempotency_key"]
        wait = self.wait_budget(arguments["wait_seconds"]) if "wait_seconds" in arguments else None
        return self._catalogue.workflow(arguments["name"]), inputs, wait

    @staticmethod
    def _message(entry: Entry, exc: IceError) -> str:
        if isinstance(exc, ArgumentsInvalid):
            return f"invalid arguments for {entry.name}: {exc.message}"
        return exc.message

    # -- built-in tools -------------------------------------------------------------------

    async def settled(self, tool: BuiltinTool, args: dict[str, Any], caller: str | None, called_as: str,
                      *, read_only: bool | None = None) -> dict[str, Any]:
        """A built-in tool's answer as plain data, for /rpc and the `network.execute` method: no progress,
        no task, a run's envelope once it ends or the wait is over. Raises IceError."""
        if (self._options.read_only if read_only is None else read_only) and not tool.annotations.read_only:
            raise IceError(f"{called_as.partition(':')[2]} may change data and the server is read-only",
                           code="forbidden")
        check_arguments(tool.input_schema, args)
        call = BuiltinCall(self._orc, args, self._key(args, {}), caller, self.wait_budget, called_as,
                           self._catalogue, self.ui_link)
        return await settle(await tool.handler(call), self.wait_budget(None))

    async def _builtin(self, entry: Entry, args: dict[str, Any], key: str | None, admin: bool,
                       follow: RunFollower, caller: str | None) -> CallAnswer:
        tool = BY_NAME[entry.target]
        if tool.admin and not admin:
            why = "the server is read-only" if self._options.read_only else "it needs the admin token"
            return error_result("forbidden", f"{tool.name} changes the catalogue and {why}")
        call = BuiltinCall(self._orc, args, key, caller, self.wait_budget, f"mcp:{tool.name}", self._catalogue,
                           self.ui_link)
        answer = await tool.handler(call)
        if isinstance(answer, Reply):
            return json_result(answer.data, is_error=answer.is_error)
        if isinstance(answer, RunStarted):
            return await follow.start(answer.start, total=answer.total, execution=answer.execution, wait=answer.wait)
        if isinstance(answer, RunWatched):
            return follow.result(await follow.watch(answer.handle, answer.wait))
        if isinstance(answer, RunAnswered):
            return follow.result(answer.record)
        if answer.started and (task := await follow.network(answer.handle)) is not None:
            return task
        return network_result(await wait_for_network(answer, follow.way.cancels))


def network_result(result: dict[str, Any]) -> types.CallToolResult:
    """A network's result as a tool result; still running, it says how to follow it."""
    answer = json_result(result, is_error=result.get("status") in FAILED)
    if result.get("status") == "running":
        answer.content.append(types.TextContent(
            type="text", text=f"Network {result.get('network_id')} is still running; call "
                              f"run_result(run_id={result.get('network_id')!r}) to wait for it."))
    return answer
