"""Tools of other MCP servers as ice_mcp tools (`SERVER.TOOL`), over one shared, self-healing connection
per configured server.

A connection is made when the server's tools are first listed (at start-up: validation needs their
schemas) and shared by every run; calls beyond `maxConcurrency` wait their turn. When the upstream
process exits or an HTTP session is dropped, the connection is ended and the next call makes a new one;
a call in flight at a crash fails readably (node retries apply); a call an HTTP server refused (a 4xx for
a session it no longer has: it did not run it) is sent again once on a new session. `tools/list_changed` refreshes the tools in the registry. Cancelling a node
cancels its upstream call (the SDK sends `notifications/cancelled`); upstream progress becomes node progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ice_mcp.errors import NodeFailure
from ice_mcp.settings import Settings
from ice_mcp.store.vocabulary import NodeEventKind
from ice_mcp.tools.context import CURRENT_CALL
from ice_mcp.tools.egress import AllowList, GuardedTransport
from ice_mcp.tools.registry import Registry, SchemaToolEntry, ToolAnnotations, as_object
from ice_mcp.tools.upstream_config import UpstreamConfig

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="ice-mcp", version="0.1.0")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# What the SDK makes of an HTTP 4xx without a JSON-RPC error in it (404: "Session terminated").
_REFUSED = frozenset({INVALID_REQUEST, INTERNAL_ERROR, CONNECTION_CLOSED})
ENV_PROGRAM = "/usr/bin/env"  # unsets what the SDK would pass on beyond the config's env (POSIX)


def safe_name(server: str, tool: str) -> str:
    """`server__tool` in the characters every model provider and MCP client accepts, at most 64 long."""
    raw = f"{server}__{tool}"
    safe = _UNSAFE.sub("_", raw)
    if safe != raw or len(safe) > 64:
        safe = f"{safe[:55]}_{hashlib.sha256(raw.encode()).hexdigest()[:8]}"  # replaced characters could collide
    return safe


def annotations_of(hints: types.ToolAnnotations | None) -> ToolAnnotations:
    """MCP's hints with MCP's defaults for those missing (not read-only, destructive, open-world)."""
    read_only = bool(hints and hints.read_only_hint)
    destructive = hints.destructive_hint if hints and hints.destructive_hint is not None else not read_only
    open_world = hints.open_world_hint if hints and hints.open_world_hint is not None else True
    return ToolAnnotations(read_only=read_only, destructive=bool(destructive) and not read_only,
                           idempotent=bool(hints and hints.idempotent_hint), open_world=bool(open_world))


def result_output(result: types.CallToolResult) -> dict[str, Any]:
    """A node's output from a tool result: its structuredContent, else its text (parsed when it is JSON);
    other content blocks (images, resources) are kept under `content`."""
    if result.structured_content is not None:
        return as_object(result.structured_content)
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    others = [block.model_dump(mode="json", by_alias=True, exclude_none=True)
              for block in result.content if not isinstance(block, types.TextContent)]
    text = "\n".join(texts)
    if texts and not others:
        try:
            return as_object(json.loads(text))
        except ValueError:
            return {"text": text}
    output: dict[str, Any] = {"text": text} if texts else {}
    if others:
        output["content"] = others
    return output


def error_text(result: types.CallToolResult) -> str:
    text = "\n".join(block.text for block in result.content if isinstance(block, types.TextContent)).strip()
    return text[:2000] or "(no message)"


def describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the exception groups task groups raise."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return exc.error.message
    if isinstance(exc, FileNotFoundError):
        return f"no such program: {exc.filename or exc}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class _WatchedReadStream:
    """The transport's read stream, calling `on_end` when it ends (the upstream process exited)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner, self._on_end = inner, on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _WatchedReadStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


def stdio_parameters(config: UpstreamConfig, environ: Mapping[str, str] | None = None) -> StdioServerParameters:
    """The process to start: only the config's `env` plus PATH (so `npx`, `uvx` and `node` are found);
    the SDK's own defaults (HOME, USER, SHELL, ...) are unset through `env -u` unless the config sets them."""
    environ = os.environ if environ is None else environ
    env = {"PATH": environ.get("PATH", os.defpath), **config.env}
    assert config.command is not None
    if sys.platform == "win32":  # no env(1): the SDK's safe defaults are passed on too
        return StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)
    unset = [arg for name in DEFAULT_INHERITED_ENV_VARS if name not in env for arg in ("-u", name)]
    return StdioServerParameters(command=ENV_PROGRAM, args=[*unset, "--", config.command, *config.args],
                                 env=env, cwd=config.cwd)


def _expand(value: str, server: str, environ: Mapping[str, str]) -> str:
    def variable(match: re.Match[str]) -> str:
        name = match[1]
        if name not in environ:
            raise NodeFailure(f"MCP server {server!r}: environment variable {name} (used in its headers) is not set",
                              code="upstream_unavailable", retryable=False)
        return environ[name]

    return _ENV_REFERENCE.sub(variable, value)


def http_headers(config: UpstreamConfig, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers to send: the config's (with `${VAR}` read from the environment) and the bearer token
    of `bearerTokenEnv`; read when connecting, kept nowhere else."""
    environ = os.environ if environ is None else environ
    headers = {key: _expand(value, config.name, environ) for key, value in config.headers.items()}
    if config.bearer_token_env:
        token = environ.get(config.bearer_token_env)
        if not token:
            raise NodeFailure(f"MCP server {config.name!r}: environment variable {config.bearer_token_env} "
                              "(its bearer token) is not set", code="upstream_unavailable", retryable=False)
        headers["Authorization"] = f"Bearer {token}"
    return headers


ToolsChanged = Callable[["UpstreamServer", list[types.Tool]], None]


class UpstreamServer:
    """One configured server: a lazily made, shared connection, re-made after it is lost."""

    def __init__(self, config: UpstreamConfig, settings: Settings, on_tools: ToolsChanged) -> None:
        self.config = config
        self.name = config.name
        self._settings = settings
        self._on_tools = on_tools
        self.connects = 0  # connections made so far
        self._client: Client | None = None
        self._ended = asyncio.Event()  # set when the connection is lost or asked to close
        self._holder: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self._stale = False
        self._refresh: asyncio.Task[None] | None = None
        self._closed = False
        self._refusals = 0  # HTTP requests of a session the server refused (400/404): it no longer has it

    # -- the connection ------------------------------------------------------------------------

    async def client(self) -> Client:
        """The live connection, made (or made again) when there is none."""
        async with self._lock:
            if self._client is not None and not self._ended.is_set():
                return self._client
            if self._closed:
                raise NodeFailure(f"MCP server {self.name!r} is closed", code="upstream_unavailable")
            await self._drop()
            ended = self._ended = asyncio.Event()
            ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
            self._holder = asyncio.create_task(self._hold(ready, ended), name=f"ice_mcp-upstream-{self.name}")
            try:
                async with asyncio.timeout(self.config.connect_timeout_seconds):
                    client = await asyncio.shield(ready)
            except TimeoutError:
                await self._drop()
                raise NodeFailure(f"MCP server {self.name!r} did not answer within "
                                  f"{self.config.connect_timeout_seconds:g} s", code="upstream_unavailable") from None
            except NodeFailure:
                await self._drop()
                raise
            except Exception as exc:
                await self._drop()
                raise NodeFailure(f"MCP server {self.name!r} cannot be started: {describe(exc)}",
                                  code="upstream_unavailable") from None
            self._client = client
            self.connects += 1
            return client

    async def _hold(self, ready: asyncio.Future[Client], ended: asyncio.Event) -> None:
        """Own the connection (an SDK client lives in the task that opened it) until it ends."""
        try:
            async with Client(self._transport(ended.set), client_info=CLIENT_INFO, message_handler=self._on_message,
                              cache=None) as client:
                ready.set_result(client)
                listener = None
                if client.protocol_version in MODERN_PROTOCOL_VERSIONS and self._lists_changes(client):
                    listener = asyncio.create_task(self._listen(client, ended))
                try:
                    await ended.wait()
                finally:
                    if listener is not None:
                        listener.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await listener
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not self._closed:
                logger.warning("MCP server %r: connection ended: %s", self.name, describe(exc))
        finally:
            ended.set()
            if not ready.done():
                ready.cancel()

    @asynccontextmanager
    async def _transport(self, on_end: Callable[[], None]) -> AsyncIterator[Any]:
        config = self.config
        if config.url is None:
            parameters = stdio_parameters(config)
            if shutil.which(config.command or "", path=(parameters.env or {}).get("PATH")) is None:
                raise NodeFailure(f"MCP server {self.name!r}: program {config.command!r} not found on PATH",
                                  code="upstream_unavailable")
            async with stdio_client(parameters) as (read, write):
                yield _WatchedReadStream(read, on_end), write
            return
        host = urlsplit(config.url).hostname or ""
        # The operator named this host in the config: the guard allows it, and still pins the address it checked.
        guard = GuardedTransport(AllowList.parse([*self._settings.allow_net, host]), proxy=self._settings.egress_proxy)
        async with httpx2.AsyncClient(transport=guard, headers=http_headers(config), follow_redirects=False,
                                      timeout=httpx2.Timeout(30.0, read=config.timeout_seconds),
                                      event_hooks={"response": [self._count_refusal]}) as http, \
                streamable_http_client(config.url, http_client=http) as (read, write):
            yield _WatchedReadStream(read, on_end), write

    async def _count_refusal(self, response: httpx2.Response) -> None:
        """A 4xx for a request of a session: the server did not run it (a restarted server, a session it
        dropped, or one that expired), whatever error the SDK makes of it."""
        request = response.request
        if response.status_code in (400, 404) and request.method == "POST" and "mcp-session-id" in request.headers:
            self._refusals += 1

    @staticmethod
    def _lists_changes(client: Client) -> bool:
        tools = client.server_capabilities.tools
        return bool(tools and tools.list_changed)

    async def _listen(self, client: Client, ended: asyncio.Event) -> None:
        """2026-07-28 servers announce tool changes on a `subscriptions/listen` stream."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    self._schedule_refresh()
        except Exception as exc:  # no stream: the tools stay as listed
            if not ended.is_set():
                logger.info("MCP server %r: no tool change stream: %s", self.name, describe(exc))

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._schedule_refresh()

    def _lose(self, client: Client) -> None:
        """End `client`'s connection if it is still the current one: the next call makes a new one."""
        if self._client is client:
            self._ended.set()

    async def _drop(self) -> None:
        """End the current connection (if any) and wait for its process to stop."""
        holder, self._holder, self._client = self._holder, None, None
        if holder is None:
            return
        self._ended.set()
        try:
            await asyncio.wait_for(asyncio.shield(holder), timeout=10)
        except (TimeoutError, asyncio.CancelledError):
            holder.cancel()
        except Exception:  # already reported by the holder
            pass

    async def aclose(self) -> None:
        self._closed = True
        if self._refresh is not None:
            self._refresh.cancel()
        async with self._lock:
            await self._drop()

    # -- tools ---------------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        client = await self.client()
        tools: list[types.Tool] = []
        cursor: str | None = None
        try:
            for _ in range(100):  # a paginator that never ends cannot hang start-up
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
        except Exception as exc:
            self._lose(client)
            raise NodeFailure(f"MCP server {self.name!r} could not list its tools: {describe(exc)}",
                              code="upstream_unavailable") from None
        return tools

    def _schedule_refresh(self) -> None:
        self._stale = True
        if not self._closed and (self._refresh is None or self._refresh.done()):
            self._refresh = asyncio.get_running_loop().create_task(self._refresh_tools())

    async def _refresh_tools(self) -> None:
        while self._stale and not self._closed:
            self._stale = False
            try:
                tools = await self.list_tools()
            except NodeFailure as exc:
                logger.warning("%s", exc.message)
                return
            self._on_tools(self, tools)

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool (waiting for a free slot); raises NodeFailure for anything but a result."""
        async with self._slots:
            for attempt in (1, 2):
                client = await self.client()
                refusals = self._refusals
                try:
                    return await client.call_tool(tool, arguments, read_timeout_seconds=self.config.timeout_seconds,
                                                  progress_callback=_progress_reporter(f"{self.name}.{tool}"))
                except MCPError as exc:
                    if self._refusals > refusals and exc.error.code in _REFUSED:  # the session is gone; it did not run
                        self._lose(client)
                        if attempt == 1:
                            continue  # send it again on a new session
                    raise self._failure(tool, exc, client) from None
                except (httpx2.HTTPError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    self._lose(client)
                    raise NodeFailure(f"MCP server {self.name!r} is unreachable: {describe(exc)}",
                                      code="upstream_unavailable") from None
        raise AssertionError("unreachable")

    def _failure(self, tool: str, exc: MCPError, client: Client) -> NodeFailure:
        name = f"{self.name}.{tool}"
        if exc.error.code == REQUEST_TIMEOUT:
            return NodeFailure(f"{name} did not answer within {self.config.timeout_seconds:g} s",
                               code="upstream_timeout")
        if exc.error.code == CONNECTION_CLOSED:
            self._lose(client)
            return NodeFailure(f"{name}: the MCP server {self.name!r} stopped during the call (connection closed); "
                               "it is started again on the next call", code="upstream_unavailable")
        return NodeFailure(f"{name} refused the call: {exc.error.message[:2000]}", code="upstream_error",
                           retryable=False, details={"upstream_code": exc.error.code})

    async def invoke(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A node's output from one call; an `isError` result is a NodeFailure carrying the upstream text."""
        result = await self.call(tool, arguments)
        if result.is_error:
            raise NodeFailure(f"{self.name}.{tool} failed: {error_text(result)}", code="upstream_error")
        return result_output(result)


def _progress_reporter(tool: str) -> Any:
    """Upstream progress as `progress` events of the node calling the tool (None outside a run)."""
    source = CURRENT_CALL.get()
    if source is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        source.emit(NodeEventKind.PROGRESS, tool=tool, progress=progress, total=total, message=message)

    return report


class Upstreams:
    """Every configured server, its tools kept in `registry` as `SERVER.TOOL`."""

    def __init__(self, configs: Iterable[UpstreamConfig], registry: Registry, settings: Settings) -> None:
        self.registry = registry
        self.servers = {c.name: UpstreamServer(c, settings, self._tools_changed) for c in configs}
        self.problems: dict[str, str] = {}  # server -> why its tools are not known

    async def start(self) -> dict[str, str]:
        """Connect to every server at once and register its tools; returns the problem of each server
        that could not be reached (its tools stay unknown)."""
        await asyncio.gather(*(self._start(server) for server in self.servers.values()))
        return dict(self.problems)

    async def _start(self, server: UpstreamServer) -> None:
        try:
            tools = await server.list_tools()
        except NodeFailure as exc:
            self.problems[server.name] = exc.message
            logger.warning("%s", exc.message)
            return
        self._tools_changed(server, tools)

    def _tools_changed(self, server: UpstreamServer, tools: list[types.Tool]) -> None:
        self.problems.pop(server.name, None)
        tools_now = self.registry.tools
        prefix = f"{server.name}."
        listed = {f"{prefix}{tool.name}": tool for tool in tools}
        for name in [n for n, e in tools_now.items() if isinstance(e, SchemaToolEntry) and e.server == server.name]:
            if name not in listed:
                self.registry.remove("tool", name)
        for name, tool in listed.items():
            current = tools_now.get(name)
            if current is not None and not (isinstance(current, SchemaToolEntry) and current.server == server.name):
                logger.warning("MCP server %r: tool %r hides a tool of the same name: left out", server.name, name)
                continue
            entry = self._entry(server, tool)
            if current is None or _changed(current, entry):
                self.registry.add(entry)

    @staticmethod
    def _entry(server: UpstreamServer, tool: types.Tool) -> SchemaToolEntry:
        async def call(arguments: dict[str, Any]) -> dict[str, Any]:
            return await server.invoke(tool.name, arguments)

        name = f"{server.name}.{tool.name}"
        return SchemaToolEntry(name=name, description=(tool.description or tool.title or name).strip(),
                               function=call, input_schema=dict(tool.input_schema or {}),
                               annotations=annotations_of(tool.annotations), server=server.name,
                               safe_name=safe_name(server.name, tool.name))

    def unavailable(self, tool_name: str) -> str | None:
        """Why the tools of `tool_name`'s server are unknown, when it is a configured server that failed."""
        server = tool_name.partition(".")[0]
        return self.problems.get(server) if server in self.servers else None

    async def aclose(self) -> None:
        await asyncio.gather(*(server.aclose() for server in self.servers.values()), return_exceptions=True)


def _changed(current: Any, new: SchemaToolEntry) -> bool:
    return (current.input_schema != new.input_schema or current.description != new.description
            or current.annotations != new.annotations)


@contextlib.asynccontextmanager
async def connected(configs: Iterable[UpstreamConfig], registry: Registry, settings: Settings
                    ) -> AsyncIterator[Upstreams]:
    """Upstreams started for the duration of a block (scripts, tests, a worker)."""
    upstreams = Upstreams(configs, registry, settings)
    try:
        await upstreams.start()
        yield upstreams
    finally:
        await upstreams.aclose()
