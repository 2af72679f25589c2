"""How a tool call follows its run and answers: a finished result, a question, a task, or a handle.

The run starts first; the answer is decided by what it does within the call's budget, in this order:
it finished (the result); a `human` node asked and the client can answer in the call (a multi-round
`InputRequiredResult` on 2026-07-28, `elicitation/create` on a 2025 session, after which the call goes on
following); it is still going and the client negotiated tasks (a `CreateTaskResult` whose id is the run
id, once the run is on disk); otherwise the envelope with `status: running` or `input_required`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from ice_mcp.errors import IceError, NotWaiting
from ice_mcp.network import NetworkHandle
from ice_mcp.observability import tracing
from ice_mcp.operations.run_relay import Progress, ProgressRelay, RunLog, relayed_run
from ice_mcp.orchestrator import Orchestrator, RunHandle
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.envelope import error_result, run_result
from ice_mcp.server.protocol.tasks import TaskView, answer_question
from ice_mcp.store.events import Listener
from ice_mcp.store.records import RunRecord

logger = logging.getLogger(__name__)

# A tool call's answer: a result, a question for the client, or a task (the flat CreateTaskResult).
CallAnswer = types.CallToolResult | types.InputRequiredResult | dict[str, Any]
# Ask the person through the client (2025 elicitation): (message, schema) -> {action, content}.
Elicit = Callable[[str, dict[str, Any]], Awaitable[Mapping[str, Any]]]
Start = Callable[[Listener | None], Awaitable[RunHandle]]
MRTR_ANSWER = "mcp:input_required"
ELICIT_ANSWER = "mcp:elicitation"
ELICIT_TRIES = 3  # a question a client keeps answering wrongly is left for run_respond
APPS_WAIT_SECONDS = 2.0  # an MCP Apps client's call waits this long, then the run view under it follows the run


@dataclass(frozen=True, slots=True)
class CallWay:
    """What a tools/call's client can take besides a finished result (the default: none of it)."""

    tasks: bool = False  # it negotiated the tasks extension: a run still going becomes a task
    input_required: bool = False  # 2026 with elicitation: a question goes back as an InputRequiredResult
    elicit: Elicit | None = None  # 2025 with elicitation: the question is asked within the call
    request_state: str | None = None  # a later round of a multi-round call: the run it continues
    input_responses: Mapping[str, Any] | None = None  # that round's answers, by question key (node path)
    # Whether the call's cancellation is the caller's, and so cancels its run (None: always). A 2025 session's
    # dropped connection or ended session is not (the spec: SHOULD NOT); notifications/cancelled is, and on
    # 2026-07-28 a closed stream is too (MUST).
    cancels: Callable[[], bool] | None = None
    # It shows MCP Apps: the run view under the call follows the run, so the call answers within APPS_WAIT_SECONDS.
    apps: bool = False

    @property
    def asks(self) -> bool:
        return self.input_required or self.elicit is not None


PLAIN = CallWay()


class RunFollower:
    """Follows one tool call's run until it can answer."""

    def __init__(self, orc: Orchestrator, options: ServerOptions, view: TaskView, way: CallWay,
                 report: Progress | None, log: RunLog | None,
                 run_view: Callable[[str], str | None] | None = None) -> None:
        self._orc, self._options, self.view, self.way = orc, options, view, way
        self._report, self._log = report, log
        self._run_view = run_view  # run id -> the run view's address for it, where the server serves one
        self._elicited: dict[str, int] = {}  # question key -> times asked by elicitation in this call

    def _budget(self, wait: float | None, execution: str, tasks: bool) -> float:
        if tasks and self.way.tasks:
            return 0.0 if execution == "task" else self._options.task_after_seconds
        budget = self._options.wait_seconds if wait is None else wait
        # A host draws the view only once the call returns: a run that goes on is shown live there, not waited on.
        return min(budget, APPS_WAIT_SECONDS) if tasks and self.way.apps else budget

    async def start(self, start: Start, *, total: int | None, execution: str = "auto",
                    wait: float | None = None, tasks: bool = True) -> CallAnswer:
        """Start (or attach to) a run and follow it; a caller who cancels the call first takes the run with it
        (`CallWay.cancels`: not a 2025 session's dropped connection)."""
        async with relayed_run(start, self._report, total, self._log, self.way.cancels) as handle:
            if tracing.ENABLED:
                tracing.annotate_request(handle.record)
            return await self._follow(handle, self._budget(wait, execution, tasks), tasks=tasks)

    async def watch(self, handle: RunHandle, wait: float) -> RunRecord:
        """A run started before (run_result), here or in another process: its progress so far and as it comes,
        until it ends, a person is asked, or `wait` seconds pass (the run goes on)."""
        if handle.done or self._report is None:
            return await handle.wait(wait, or_question=True)
        total = len(handle.plan.graph.nodes) if handle.plan is not None else None
        relay = ProgressRelay(self._report, total)
        for event in list(handle.events.events):
            relay.on_event(event)
        handle.subscribe(relay.on_event)
        try:
            return await handle.wait(wait, or_question=True)
        finally:
            handle.unsubscribe(relay.on_event)
            await relay.flush()

    async def next_round(self, run_id: str) -> CallAnswer:
        """A multi-round call's next round (`requestState` is the run id, sealed by the SDK): deliver the
        answers, then follow the run as the first round did."""
        handle = self._orc.watch(run_id)  # here, or another process's run followed through the store
        if handle is None:
            return error_result("unknown_run", f"unknown run {run_id!r}")
        if handle.record.done:
            return self.result(handle.record)
        try:
            for key, response in (self.way.input_responses or {}).items():
                await self._answer(handle, key, response, MRTR_ANSWER)
            execution = handle.plan.blueprint.execution if handle.plan is not None else "auto"
            return await self._follow(handle, self._budget(None, execution, True), tasks=True)
        except asyncio.CancelledError:  # the caller cancelled: as in the first round, the run goes too
            if self.way.cancels is None or self.way.cancels():
                handle.cancel()
            raise

    async def _answer(self, handle: RunHandle, key: str, response: Any, by: str) -> None:
        if isinstance(response, types.ElicitResult):
            response = response.model_dump(by_alias=True, mode="json", exclude_none=True)
        if not isinstance(response, Mapping):
            return  # not an elicitation answer: the question is asked again
        try:
            await answer_question(self._orc, handle.run_id, key, response, by=by)
        except NotWaiting:  # a resumed run may not have asked again yet: wait for it once
            await handle.wait(1.0, or_question=True)
            try:
                await answer_question(self._orc, handle.run_id, key, response, by=by)
            except NotWaiting:
                logger.info("answer to %s of run %s not delivered: it no longer waits", key, handle.run_id)

    async def _follow(self, handle: RunHandle, budget: float, *, tasks: bool) -> CallAnswer:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        task_now = tasks and self.way.tasks and budget <= 0  # `execution: task`: its questions go on the task
        asks = self.way.asks and not task_now
        while not task_now:
            record = await handle.wait(max(0.0, deadline - loop.time()), or_question=asks)
            if record.done:
                return self.result(record)
            if asks and record.questions:
                if self.way.input_required and (requests := elicitations(record)):
                    return types.InputRequiredResult(input_requests=requests, request_state=record.run_id)
                if self.way.elicit is not None and await self._elicit(handle, record):
                    deadline = loop.time() + budget  # someone answered: a fresh budget for what follows
                    continue
                asks = False  # questions this client cannot take: they wait for run_respond or a task
                continue
            if loop.time() >= deadline:
                break
        if tasks and self.way.tasks:
            await self._orc.sync_store()  # a task exists once `tasks/get` finds it, from any server
            return self.view.created(handle.record)
        return self.result(handle.record)

    def result(self, record: RunRecord) -> types.CallToolResult:
        """The run's envelope as the tool result; one still going names where to watch it."""
        return run_result(record, self._run_view(record.run_id) if self._run_view is not None else None)

    async def _elicit(self, handle: RunHandle, record: RunRecord) -> bool:
        """Ask each pending question by `elicitation/create` (a few times at most); True when one was answered."""
        assert self.way.elicit is not None
        answered = False
        for key, question in list(record.questions.items()):
            if self._elicited.get(key, 0) >= ELICIT_TRIES:
                continue
            self._elicited[key] = self._elicited.get(key, 0) + 1
            try:
                response = await asyncio.wait_for(
                    self.way.elicit(str(question.get("question") or ""), dict(question.get("schema") or {})),
                    self._options.max_wait_seconds)
                await self._answer(handle, key, response, ELICIT_ANSWER)
                answered = True
            except (TimeoutError, IceError):
                continue
            except Exception:  # the client could not show it: run_respond still can
                logger.info("elicitation for %s of run %s failed", key, record.run_id, exc_info=True)
        return answered

    async def network(self, handle: NetworkHandle) -> CallAnswer | None:
        """A network call from a task client: a task unless it ends within the task budget (None: it did)."""
        if not self.way.tasks:
            return None
        await handle.wait(timeout=self._options.task_after_seconds)
        return None if handle.done else self.view.created_network(handle)


def elicitations(record: RunRecord) -> dict[str, Any]:
    """The run's pending questions as elicitation requests (those whose schema a form can show)."""
    found: dict[str, Any] = {}
    for key, question in record.questions.items():
        try:
            found[key] = types.ElicitRequest(params=types.ElicitRequestFormParams(
                message=str(question.get("question") or ""), requested_schema=question.get("schema") or {}))
        except ValidationError:
            continue
    return found
