"""What a built-in tool is: its declaration (`BuiltinTool`), the call its handler receives and the answers it gives.

The tools themselves are listed in `builtins.py` (runs, blueprints, networks) and `schedule_tools.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ice_mcp.network import NetworkHandle
from ice_mcp.operations.run_relay import run_and_wait
from ice_mcp.orchestrator import Orchestrator, RunHandle
from ice_mcp.store.events import Listener
from ice_mcp.store.records import RunRecord

# What a caller must be allowed to do: read runs and the catalogue, start or steer runs, change the catalogue.
Scope = Literal["read", "run", "admin"]

KEY_SCHEMA = {"type": "string", "description": "Retrying with the same key attaches to the same run."}
MAX_WAIT_PARAM = 1e9  # seconds; larger is not a wait but an attack on float conversion
WAIT_SCHEMA = {
    "type": "number",
    "minimum": 0,
    "maximum": MAX_WAIT_PARAM,
    "description": "Seconds to wait for the run before answering `running` (the server may wait less).",
}
BLUEPRINT_SCHEMA = {
    "anyOf": [{"type": "object"}, {"type": "string"}],
    "description": "A blueprint: a JSON object, or JSON/YAML text (see the ice://docs/blueprint-format resource).",
}
RUN_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled", "timed_out", "over_budget",
                "input_required"]


def obj_schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
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


READ_ONLY = Hints(read_only=True, destructive=False, idempotent=True, open_world=False)
DELETES = Hints(read_only=False, destructive=True, idempotent=True, open_world=False)  # forgets what it names
STARTS = Hints(read_only=False, destructive=False, idempotent=False, open_world=True)  # keeps what starts runs


# -- what a handler receives and answers ------------------------------------------------------------


class Named(Protocol):
    """What a handler reads of a catalogue entry: the name a client calls it by."""

    @property
    def name(self) -> str: ...


class ToolFinder(Protocol):
    """What a handler asks of the MCP catalogue: a tool by name or canonical id, and workflow_search's results."""

    def resolve(self, name: str) -> Named | None: ...

    def search(self, query: str, limit: int = 5) -> list[dict[str, Any]]: ...


@dataclass(slots=True)
class BuiltinCall:
    """One call of a built-in tool, its arguments already checked against the tool's input schema."""

    orc: Orchestrator
    args: dict[str, Any]
    key: str | None  # idempotency key, from the arguments or the request's _meta
    caller: str | None
    wait_budget: Callable[[Any], float]  # a requested wait_seconds -> the seconds this server will wait
    called_as: str  # transport and name, as an answer's `by` records it: "mcp:run_respond", "rpc:run.respond"
    catalogue: ToolFinder | None = None  # the MCP catalogue, where there is one
    ui_link: Callable[[], dict[str, Any]] | None = None  # the run view's address for the caller (over HTTP)


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


def replying(answer: Callable[[BuiltinCall], Any]) -> Handler:
    """A handler that replies with what `answer` makes of the call: a desk's own answer, as it is."""

    async def handler(call: BuiltinCall) -> Answer:
        return Reply(answer(call))

    return handler


async def wait_for_network(answer: NetworkFollowed, cancels: Callable[[], bool] | None = None) -> dict[str, Any]:
    """A network's result once it ends or the wait is over; a caller without a key who cancels while waiting
    for a network it started takes it along (when `cancels()` says the cancellation is the caller's)."""
    try:
        return await answer.handle.wait(timeout=answer.wait)
    except asyncio.CancelledError:
        if answer.started and not answer.key and (cancels is None or cancels()):
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
    cli_flags: tuple[str, ...] = ()  # required strings the command takes as `--flags` rather than positionally
    forwards_to_workflow: bool = False  # over MCP a call of it becomes the named workflow's own call
    shows_run: bool = False  # its answer names a run the run view (the MCP App) can follow

    @property
    def admin(self) -> bool:
        return self.scope == "admin"
