"""The MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), on the SDK's extension mechanism.

A task is a run: its id is the run id, so `tasks/get` answers from the run record wherever it is kept
(this process, the run store after a restart, another server on the same data folder). The decision
"task or not" is taken by the tool call after its run started (see `calls.py`): a run that finished
within the budget answers at once, a question asked first goes back as a multi-round `InputRequiredResult`,
and only then does the call answer with a task. This module serves `tasks/get`, `tasks/update` and
`tasks/cancel`, refuses a `required` tool to a client that cannot take a task, and builds the wire shapes.
Network runs (`net_...`) are tasks too while their server lives.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.shared.inbound import MCP_NAME_HEADER, decode_header_value
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from ice_mcp.errors import IceError
from ice_mcp.network import NETWORK_ID_PREFIX, NetworkHandle
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.catalogue import Catalogue
from ice_mcp.server.protocol.envelope import FAILED, json_result, run_result
from ice_mcp.store.records import RunRecord, iso

logger = logging.getLogger(__name__)

TASKS = "io.modelcontextprotocol/tasks"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# Runs that ended this way broke inside ice_mcp (not in a tool or a node): a task `failed`, not a tool error.
INTERNAL_CODES = frozenset({"internal_error", "resume_failed"})
ANSWER_ACTIONS = frozenset({"accept", "decline", "cancel"})
Ctx = ServerRequestContext[Any, Any]


def modern(ctx: Ctx) -> bool:
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


def negotiated(ctx: Ctx) -> bool:
    """The request's client declared the extension (in its `_meta` capabilities, for this request or all)."""
    capabilities = ctx.session.client_capabilities
    extensions = capabilities.extensions if capabilities is not None else None
    return modern(ctx) and bool(extensions) and TASKS in extensions  # type: ignore[operator]


def can_elicit(ctx: Ctx) -> bool:
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and capabilities.elicitation is not None


def missing_capability(message: str) -> MCPError:
    return MCPError(types.MISSING_REQUIRED_CLIENT_CAPABILITY, message,
                    data={"requiredCapabilities": {"extensions": {TASKS: {}}}})


class TaskParams(types.RequestParams):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    task_id: str = Field(alias="taskId")


class UpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


def input_requests(questions: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A run's pending questions as the elicitation requests a client answers (keyed by node path)."""
    return {path: {"method": "elicitation/create",
                   "params": {"mode": "form", "message": str(q.get("question") or ""),
                              "requestedSchema": q.get("schema") or {"type": "object", "properties": {}}}}
            for path, q in questions.items()}


def _internal(record: RunRecord) -> dict[str, Any] | None:
    """The run's error when it broke inside ice_mcp rather than in what it ran."""
    error = record.error if isinstance(record.error, Mapping) else {}
    cause = (error.get("details") or {}).get("cause") if isinstance(error.get("details"), Mapping) else None
    for found in (error, cause if isinstance(cause, Mapping) else {}):
        if found.get("code") in INTERNAL_CODES:
            return dict(found)
    return None


class TaskView:
    """Task wire shapes from run records and network handles."""

    def __init__(self, orc: Orchestrator, options: ServerOptions) -> None:
        self._orc = orc
        self._options = options

    def _common(self, task_id: str, status: str, created: float | None, updated: float | None) -> dict[str, Any]:
        now = time.time()
        return {"taskId": task_id, "status": status, "createdAt": iso(created or now),
                "lastUpdatedAt": iso(updated or created or now),
                # Kept in the run store until someone deletes it: no expiry (null); without a store, the
                # orchestrator keeps the latest runs only, which an hour covers in any sane load.
                "ttlMs": None if self._orc.store is not None else 3_600_000,
                "pollIntervalMs": max(1, round(self._options.task_poll_seconds * 1000))}

    def _updated(self, record: RunRecord) -> float | None:
        handle = self._orc.get_handle(record.run_id)
        if handle is not None and handle.events.events:
            return handle.events.events[-1].ts
        asked = [float(q.get("asked_at") or 0) for q in record.questions.values()]
        return max([record.finished_at or 0, record.started_at or 0, *asked]) or None

    def record(self, run_id: str) -> RunRecord | None:
        return self._orc.get_run(run_id)

    def created(self, record: RunRecord) -> dict[str, Any]:
        """The flat CreateTaskResult of a run (its status now, nothing inlined)."""
        task = self._common(record.run_id, self._status(record), record.started_at, self._updated(record))
        return {"resultType": "task", **task}

    def created_network(self, handle: NetworkHandle) -> dict[str, Any]:
        return {"resultType": "task", **self.detailed_network(handle, inline=False)}

    @staticmethod
    def _status(record: RunRecord) -> str:
        if record.status in ("running", "queued"):
            return "working"
        if record.status == "input_required":
            return "input_required"
        if record.status == "cancelled":
            return "cancelled"
        return "failed" if _internal(record) is not None else "completed"

    def detailed(self, record: RunRecord) -> dict[str, Any]:
        """What `tasks/get` answers: the status, with the result, the error or the questions inlined."""
        status = self._status(record)
        task = self._common(record.run_id, status, record.started_at, self._updated(record))
        if status == "input_required":
            task["inputRequests"] = input_requests(record.questions)
        elif status == "completed":
            task["result"] = self._inline(run_result(record))
        elif status == "failed":
            internal = _internal(record) or {}
            task["error"] = {"code": INTERNAL_ERROR, "message": str(internal.get("message") or "internal error"),
                             "data": {"run_id": record.run_id, "code": internal.get("code")}}
        return task

    def detailed_network(self, handle: NetworkHandle, *, inline: bool = True) -> dict[str, Any]:
        result = handle.result()
        status = "working" if not handle.done else "cancelled" if handle.status == "cancelled" else "completed"
        task = self._common(handle.network_id, status, None, None)
        if inline and status == "completed":
            task["result"] = self._inline(json_result(result, is_error=result.get("status") in FAILED))
        return task

    @staticmethod
    def _inline(result: types.CallToolResult) -> dict[str, Any]:
        return {**result.model_dump(by_alias=True, mode="json", exclude_none=True), "resultType": "complete"}


class TasksExtension(Extension):
    """`tasks/get`, `tasks/update`, `tasks/cancel` on 2026-07-28 connections, gated on negotiation; a
    `required` tool (a workflow with `execution: task`) refused to a 2026 client that cannot take a task."""

    identifier = TASKS

    def __init__(self, orc: Orchestrator, options: ServerOptions, catalogue: Catalogue) -> None:
        self._orc = orc
        self._catalogue = catalogue
        self.view = TaskView(orc, options)

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [MethodBinding("tasks/get", TaskParams, self._get, versions),
                MethodBinding("tasks/update", UpdateParams, self._update, versions),
                MethodBinding("tasks/cancel", TaskParams, self._cancel, versions)]

    async def intercept_tool_call(self, params: types.CallToolRequestParams, ctx: Ctx,
                                  call_next: CallNext) -> HandlerResult:
        entry = self._catalogue.resolve(params.name)
        if entry is not None and entry.forwards_to_workflow and isinstance(name := (params.arguments or {}).get(
                "name"), str):  # the workflow it starts is the one that may need a task
            entry = self._catalogue.resolve(name) or self._catalogue.resolve(f"workflow:{name}")
        if entry is not None and entry.kind == "workflow" and modern(ctx) and not negotiated(ctx):
            workflow = self._orc.registry.workflows.get(entry.target)
            if workflow is not None and workflow.blueprint.execution == "task":
                raise missing_capability(f"{entry.name} runs only as a task: declare the {TASKS} extension")
        return await call_next(ctx)

    # -- the methods --------------------------------------------------------------------------------

    def _check(self, ctx: Ctx, task_id: str) -> None:
        if not negotiated(ctx):
            raise missing_capability(f"{ctx.method} needs the {TASKS} extension, which this request did not declare")
        request = ctx.request
        header = request.headers.get(MCP_NAME_HEADER) if request is not None else None
        if header is not None and decode_header_value(header) != task_id:
            raise MCPError(types.HEADER_MISMATCH, f"{MCP_NAME_HEADER} header does not match params.taskId")

    def _network(self, task_id: str) -> NetworkHandle | None:
        return self._orc.get_network(task_id) if task_id.startswith(NETWORK_ID_PREFIX) else None

    def _record(self, task_id: str) -> RunRecord:
        record = self._orc.get_run(task_id)
        if record is None:
            raise MCPError(INVALID_PARAMS, f"unknown task {task_id!r}", data={"taskId": task_id})
        return record

    async def _get(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        self._check(ctx, params.task_id)
        if (network := self._network(params.task_id)) is not None:
            return self.view.detailed_network(network)
        return self.view.detailed(self._record(params.task_id))

    async def _cancel(self, ctx: Ctx, params: TaskParams) -> dict[str, Any]:
        self._check(ctx, params.task_id)
        if (network := self._network(params.task_id)) is not None:
            network.cancel()
            await network.wait(timeout=5)
            return {}
        record = self._record(params.task_id)
        if not record.done:
            await self._orc.cancel(params.task_id)  # here, or through the store where it runs
        return {}  # the ack; the status is on the next tasks/get (idempotent on a finished task)

    async def _update(self, ctx: Ctx, params: UpdateParams) -> dict[str, Any]:
        self._check(ctx, params.task_id)
        record = self._record(params.task_id)
        for key, response in params.input_responses.items():
            if key not in record.questions or not isinstance(response, Mapping):
                continue  # unknown keys are ignored (a stale or foreign answer)
            await deliver(self._orc, record.run_id, key, response, by="mcp:tasks/update")
        return {}


async def answer_question(orc: Orchestrator, run_id: str, node_path: str, response: Mapping[str, Any], *,
                          by: str) -> None:
    """An elicitation response (`{action, content}`) as the answer to a run's question; raises IceError."""
    action = response.get("action")
    if action not in ANSWER_ACTIONS:
        raise IceError(f"the response for {node_path!r} needs action accept, decline or cancel",
                       code="invalid_answer")
    if action == "accept":
        await orc.respond(run_id, node_path, dict(response.get("content") or {}), by=by)
    else:
        await orc.respond(run_id, node_path, None, by=by, declined=True)


async def deliver(orc: Orchestrator, run_id: str, node_path: str, response: Mapping[str, Any], *, by: str) -> None:
    """`answer_question` for a JSON-RPC method: a problem is an invalid-params error."""
    try:
        await answer_question(orc, run_id, node_path, response, by=by)
    except IceError as exc:
        raise MCPError(INVALID_PARAMS, exc.message, data=exc.as_dict()) from None
