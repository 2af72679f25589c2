"""A tasks-extension client for the tests, on the Python SDK's client extension mechanism: it declares
`io.modelcontextprotocol/tasks`, claims the `CreateTaskResult` of a `tools/call`, polls `tasks/get`, answers
`input_required` questions with `tasks/update`, and returns the inlined tool result."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

import mcp_types as types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import ConfigDict, Field, TypeAdapter

TASKS = "io.modelcontextprotocol/tasks"
AS_DICT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])
Answer = Callable[[str, dict[str, Any]], dict[str, Any]]  # (question key, elicitation params) -> {action, content}


class CreatedTask(types.Result):
    """The flat CreateTaskResult (a claimed `tools/call` shape)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    result_type: Literal["task"] = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(default=None, alias="pollIntervalMs")


class TaskFailed(Exception):
    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(f"task {task.get('taskId')} {task.get('status')}: {task.get('error')}")
        self.task = task


class TaskRequest(types.Request[dict[str, Any], str]):
    """`tasks/get`, `tasks/update`, `tasks/cancel`: the task id goes in the `Mcp-Name` header too (SEP-2663)."""

    name_param = "taskId"


async def task_request(session: Any, method: str, **params: Any) -> dict[str, Any]:
    """One `tasks/*` request through the SDK session (its `_meta` carries this client's capabilities)."""
    return await session.send_request(TaskRequest(method=method, params=params), AS_DICT)  # type: ignore[no-any-return]


class TasksClient(ClientExtension):
    """Resolves tasks to their results; `answer` answers each question (None: leave questions alone)."""

    identifier = TASKS

    def __init__(self, answer: Answer | None = None, *, timeout: float = 60.0) -> None:
        self.answer = answer
        self.timeout = timeout
        self.created: list[CreatedTask] = []
        self.seen: list[dict[str, Any]] = []  # every tasks/get answer, in order

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self._resolve)]

    async def _resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while loop.time() < deadline:
            task = await task_request(ctx.session, "tasks/get", taskId=created.task_id)
            self.seen.append(task)
            if task["status"] == "completed":
                return types.CallToolResult.model_validate(task["result"])
            if task["status"] in ("failed", "cancelled"):
                raise TaskFailed(task)
            if task["status"] == "input_required" and self.answer is not None:
                responses = {key: self.answer(key, request["params"]) for key, request in task["inputRequests"].items()}
                await task_request(ctx.session, "tasks/update", taskId=created.task_id, inputResponses=responses)
                continue
            await asyncio.sleep((created.poll_interval_ms or 200) / 1000)
        raise TimeoutError(f"task {created.task_id} did not finish in {self.timeout} s")
