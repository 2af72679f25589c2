"""Streamable HTTP sessions with limits: a cap per client and overall, idle expiry, no duplicate ids in flight."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ice_mcp.server.auth.callers import principal_in
from ice_mcp.server.web import bodies
from ice_mcp.server.web.guard import replay

logger = logging.getLogger(__name__)

INVALID_REQUEST = -32600
SERVER_BUSY = -32000
# Who opens the session being admitted (set per request by SessionEndpoint, read under the SDK's lock).
CLIENT: ContextVar[str] = ContextVar("ice_mcp_session_client", default="unknown")


@dataclass(slots=True)
class SessionUse:
    client: str
    last_used: float
    in_flight: int = 0


class LimitedSessionManager(StreamableHTTPSessionManager):
    """The SDK's manager (idle timeout, global cap) plus a cap per client; room is made by evicting idle sessions."""

    def __init__(self, app: Any, *, max_sessions_per_client: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self.max_sessions_per_client = max_sessions_per_client
        self.uses: dict[str, SessionUse] = {}

    def sessions_of(self, client: str) -> list[str]:
        return [sid for sid, use in self.uses.items() if use.client == client]

    def _admit_session(
        self, requestor: AuthorizationContext | None
    ) -> StreamableHTTPServerTransport | None:
        client = CLIENT.get()
        if len(self.sessions_of(client)) >= self.max_sessions_per_client:
            return None  # a concurrent opening took the room make_room() found
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.uses[transport.mcp_session_id] = SessionUse(client, time.monotonic())
        return transport

    async def _discard_session(
        self, session_id: str, transport: StreamableHTTPServerTransport
    ) -> None:
        self.uses.pop(session_id, None)
        await super()._discard_session(session_id, transport)

    async def make_room(self, client: str) -> bool:
        """Before `client` opens a session: evict what the caps require. False when nothing idle can go."""
        mine = self.sessions_of(client)
        if len(mine) >= self.max_sessions_per_client:
            return await self._evict_oldest_idle(mine)
        if self.max_sessions is not None and len(self.uses) >= self.max_sessions:
            # The client holding the most sessions gives one up first.
            biggest = Counter(use.client for use in self.uses.values()).most_common(1)[0][0]
            return await self._evict_oldest_idle(self.sessions_of(biggest)) or (
                await self._evict_oldest_idle(list(self.uses))
            )
        return True

    async def _evict_oldest_idle(self, candidates: list[str]) -> bool:
        idle = [sid for sid in candidates if self.uses[sid].in_flight == 0]
        if not idle:
            return False
        victim = min(idle, key=lambda sid: self.uses[sid].last_used)
        logger.info("evicting idle session %s of %s", victim, self.uses[victim].client)
        transport = self._server_instances.get(victim)
        if transport is None:
            self.uses.pop(victim, None)
        else:
            await self._discard_session(victim, transport)
        return True

    @contextlib.contextmanager
    def using(self, session_id: str | None) -> Iterator[None]:
        """A request in flight on a session: that session is not idle, and is freshly used afterwards."""
        use = self.uses.get(session_id) if session_id else None
        if use is None:
            yield
            return
        use.in_flight += 1
        try:
            yield
        finally:
            use.in_flight -= 1
            use.last_used = time.monotonic()


def _request_id(message: Any) -> str | None:
    """The id of a decoded JSON-RPC request, as the SDK keys its streams (`str(id)`); None otherwise."""
    if not isinstance(message, dict) or "method" not in message:
        return None
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        return None
    return str(request_id)


def _rpc_error(status: int, code: int, message: str, request_id: Any = None) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    headers = {"Retry-After": "1"} if status == 429 else None
    return JSONResponse(body, status_code=status, headers=headers)


class SessionEndpoint:
    """The ASGI app at `/mcp`: knows the client, keeps its sessions within caps, refuses duplicate ids."""

    def __init__(self, manager: LimitedSessionManager, *, token_configured: bool) -> None:
        self.manager = manager
        self.token_configured = token_configured
        self._in_flight: set[tuple[str, str]] = set()

    def client_of(self, scope: Scope, headers: Headers) -> str:
        """The principal when callers sign in (a token, OAuth: the Guard found it), else the peer address."""
        principal = principal_in(scope)
        if self.token_configured and principal is not None:
            return principal.id
        peer = scope.get("client")
        return f"peer:{peer[0]}" if peer else "peer:unknown"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        CLIENT.set(self.client_of(scope, headers))
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        legacy = version is None or version in HANDSHAKE_PROTOCOL_VERSIONS
        if self.manager.stateless or not legacy:
            await self.manager.handle_request(scope, receive, send)
            return
        if session_id is None:
            if scope.get("method") == "POST" and not await self.manager.make_room(CLIENT.get()):
                await _rpc_error(
                    429,
                    SERVER_BUSY,
                    "Too many open sessions for this client, none idle: "
                    "end one (HTTP DELETE) or let one finish",
                )(scope, receive, send)
                return
            await self.manager.handle_request(scope, receive, send)
            return
        with self.manager.using(session_id):
            if scope.get("method") != "POST":
                await self.manager.handle_request(scope, receive, send)
                return
            body = await _read_body(receive)
            # A big body is decoded in a worker thread; the SDK then decodes it again (on the loop: its code).
            message = await bodies.off_loop(bodies.try_decode, body)
            request_id = _request_id(message)
            key = (session_id, request_id) if request_id is not None else None
            if key is not None and key in self._in_flight:
                await _rpc_error(
                    409,
                    INVALID_REQUEST,
                    f"Invalid request: id {key[1][:100]!r} is already in flight on this "
                    "session; use a new id for each request",
                    message.get("id"),
                )(scope, receive, send)
                return
            if key is not None:
                self._in_flight.add(key)
            try:
                await self.manager.handle_request(scope, replay(body, receive), send)
            finally:
                if key is not None:
                    self._in_flight.discard(key)


async def _read_body(receive: Receive) -> bytes:
    """The whole body (the Guard has already capped its size)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
