"""stdio transport: what Claude Desktop starts. Only MCP goes to stdout; every malformed request is answered."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import queue
import threading
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from ice_mcp.errors import IceError
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.untrusted import lone_surrogate
from ice_mcp.server.warm_start import WarmStart

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def _problem(message: Any) -> str:
    """What makes a decoded line no JSON-RPC 2.0 message, in words a client can act on."""
    if not isinstance(message, dict):
        return "a message must be a JSON object (batches are not supported)"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message and not isinstance(message["method"], str):
        return "method must be a string"
    if "params" in message and not isinstance(message["params"], dict):
        return "params must be an object"
    if lone_surrogate(message) is not None:
        return "a string holds a lone UTF-16 surrogate (not valid Unicode)"
    return "not a valid JSON-RPC 2.0 request, notification or response"


def rejection(line: str) -> types.JSONRPCError | None:
    """The error answering a line the SDK cannot read, or None when it can (or nobody awaits an answer)."""
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValueError:
        pass
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return types.JSONRPCError(
            jsonrpc="2.0", id=None, error=types.ErrorData(code=PARSE_ERROR, message="Parse error")
        )
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(message, dict) and "id" not in message:
        return None  # a malformed notification: nobody waits for an answer
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    elif isinstance(request_id, str) and lone_surrogate(request_id) is not None:
        request_id = None  # it could not be written back
    elif isinstance(request_id, int) and not -(2**63) <= request_id < 2**63:
        request_id = None
    error = types.ErrorData(code=INVALID_REQUEST, message=f"Invalid request: {_problem(message)}")
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


class CheckedLines:
    """stdin lines for the SDK's reader; a line it could not read is answered here instead of dropped."""

    def __init__(self, source: AsyncIterable[str]) -> None:
        self._source = source
        self._answers: Any = None
        self._attached = anyio.Event()

    def attach(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._attached.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            error = rejection(line)
            if error is None:
                yield line
                continue
            await self._attached.wait()
            await self._answers.send(SessionMessage(error))


class WrittenLines:
    """stdout for the SDK's writer: each line as `start` has it written, and when all handed over is flushed."""

    def __init__(self, wire: io.TextIOWrapper, start: WarmStart) -> None:
        self._wire = anyio.wrap_file(wire)
        self._start = start
        self._writing = 0
        self._flushed = anyio.Event()

    async def write(self, line: str) -> None:
        self._writing += 1  # until its flush: the SDK's writer flushes after each line
        try:
            for written in self._start.outgoing(line):
                await self._wire.write(written)
        except BaseException:
            self._done()
            raise

    async def flush(self) -> None:
        try:
            await self._wire.flush()
        finally:
            self._done()
        self._start.keep()

    def _done(self) -> None:
        self._writing -= 1
        self._flushed.set()

    async def written(self) -> None:
        """Returns once the lines handed over so far are on the wire."""
        await anyio.lowlevel.checkpoint()  # a writer woken by a message hands its line over first
        while self._writing:
            self._flushed = anyio.Event()
            await self._flushed.wait()


@contextlib.contextmanager
def _claimed(fd: int, mode: str, diversion: int, errors: str) -> Iterator[io.TextIOWrapper]:
    """The wire on a private descriptor; meanwhile `fd` points at `diversion` (the null device for stdin, so no
    child consumes requests; stderr for stdout, so no stray print corrupts the protocol)."""
    wire = os.dup(fd)
    saved = os.dup(fd)
    os.dup2(diversion, fd)
    os.close(diversion)
    try:
        yield io.TextIOWrapper(os.fdopen(wire, mode + "b"), encoding="utf-8", errors=errors)
    finally:
        os.dup2(saved, fd)
        os.close(saved)


async def serve_stdio(orc: Any, options: ServerOptions | None = None) -> None:
    """Serve `orc` over stdin and stdout until the client closes stdin."""

    @contextlib.asynccontextmanager
    async def given() -> AsyncIterator[Any]:
        yield orc

    await serve_stdio_starting(given, options, WarmStart.off())


async def serve_stdio_starting(open_orchestrator: Callable[[], AbstractAsyncContextManager[Any]],
                               options: ServerOptions | None, start: WarmStart) -> None:
    """Serve the orchestrator `open_orchestrator()` builds, over stdin and stdout until the client closes stdin.
    It is built first, unless `start` answers the session's first requests meanwhile (see warm_start)."""
    async with contextlib.AsyncExitStack() as resources:  # the orchestrator closes after the wire
        orc: Any = None if start.answers_early else await resources.enter_async_context(open_orchestrator())
        try:
            with _claimed(0, "r", os.open(os.devnull, os.O_RDONLY), "replace") as wire_in, \
                    _claimed(1, "w", os.dup(2), "strict") as wire_out:
                reader = _LineReader(wire_in)
                lines, out = CheckedLines(_read_lines(reader, start)), WrittenLines(wire_out, start)
                async with stdio_server(stdin=lines, stdout=out) as (client_in, client_out):  # type: ignore[arg-type]
                    lines.attach(client_out)
                    start.attach(client_out)
                    if orc is None:
                        await start.until_build(reader.readline, out.written)
                        orc = await resources.enter_async_context(open_orchestrator())
                    # The server's modules load after the kept answers went out too.
                    from ice_mcp.server.protocol.server import build_server

                    server = build_server(orc, options)
                    await server.run(client_in, client_out, server.create_initialization_options())
        except BaseExceptionGroup as group:  # the transport's task groups wrap what building raised
            raise _sole(group) from None


def _sole(error: BaseException) -> BaseException:
    """The one exception inside nested groups of one (an IceError the command line prints), or the group."""
    inner = error
    while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
        inner = inner.exceptions[0]
    return inner if isinstance(inner, IceError) else error


class _LineReader:
    """Reads the wire's lines on a daemon thread of its own, one when asked: a read still waiting when the server
    stops (a host may keep stdin open after a start that failed) never holds up the process's exit."""

    def __init__(self, wire: io.TextIOWrapper) -> None:
        self._wire = wire
        self._asks: queue.SimpleQueue[asyncio.Future[str]] = queue.SimpleQueue()
        self._pending: asyncio.Future[str] | None = None
        threading.Thread(target=self._serve, name="ice-mcp stdin", daemon=True).start()

    def _serve(self) -> None:
        while True:
            asked = self._asks.get()
            try:
                line, error = self._wire.readline(), None
            except Exception as exc:
                line, error = "", exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads any more
                asked.get_loop().call_soon_threadsafe(_settle, asked, line, error)

    async def readline(self) -> str:
        """The next line, "" at the end; a read cancelled while it waits is not lost: the next call gets its line."""
        if self._pending is None:
            self._pending = asyncio.get_running_loop().create_future()
            self._asks.put(self._pending)
        line = await asyncio.shield(self._pending)
        self._pending = None
        return line


def _settle(asked: asyncio.Future[str], line: str, error: Exception | None) -> None:
    if asked.cancelled():
        return
    if error is not None:
        asked.set_exception(error)
    else:
        asked.set_result(line)


async def _read_lines(reader: _LineReader, start: WarmStart) -> AsyncIterator[str]:
    """The wire's lines for the server: first those a warm start read while it was built, each then shown to
    `start` (which notes the session's first requests)."""
    for line in await start.read_ahead():
        yield line
    while line := await reader.readline():
        start.look(line)
        yield line
