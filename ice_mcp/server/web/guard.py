"""What stands in front of every HTTP route: Host/Origin checks, who the caller is (static tokens or OAuth,
with the scope a request needs checked before it runs) and a body-size cap."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ice_mcp.principals import acting_as
from ice_mcp.server.auth.authenticators import COOKIE, Authenticator, Refusal, authenticated
from ice_mcp.server.auth.callers import read_authorization
from ice_mcp.server.untrusted import valid_host, valid_origin
from ice_mcp.server.web import bodies
from ice_mcp.server.web.rpc import INVALID_REQUEST, error_body

DEFAULT_MAX_BODY = 4 * 1024 * 1024
# Where a token is asked for; the /ui page and its assets hold no data: a browser loads them unasked.
PROTECTED = ("/mcp", "/rpc", "/ui/api", "/metrics")
GET_SCOPES = {"/metrics": "ice:admin"}  # a GET needs ice:read with OAuth; /metrics counts every user's runs


def security_settings(
    host: str, port: int, extra_hosts: list[str] | None = None
) -> TransportSecuritySettings:
    """Host/Origin validation, always on: loopback names plus the bound host."""
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if host not in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::"):
        hosts += [f"{host}:{port}", host]
        origins += [f"http://{host}:{port}", f"https://{host}:{port}"]
    for extra in extra_hosts or []:
        hosts.append(extra)
        origins += [f"http://{extra}", f"https://{extra}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class Guard:
    """Strict Host/Origin, one `Authorization`, its principal (`auth`), the scope a request needs
    (`scope_of(path, decoded body)`, OAuth only: decided before anything runs) and a body cap."""

    def __init__(
        self, app: ASGIApp, *, auth: Authenticator, max_body: int,
        scope_of: Callable[[str, Any], str] | None = None,
    ) -> None:
        self.app = app
        self.auth = auth
        self.max_body = max_body
        self.scope_of = scope_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        hosts, origins = headers.getlist("host"), headers.getlist("origin")
        # Parsed strictly here, before the SDK's prefix match against the allow-list.
        if len(hosts) != 1 or not valid_host(hosts[0]):
            await _refuse(421, INVALID_REQUEST, "Invalid Host header", scope, receive, send)
            return
        if len(origins) > 1 or not valid_origin(origins[0] if origins else None):
            await _refuse(403, INVALID_REQUEST, "Invalid Origin header", scope, receive, send)
            return
        if not str(scope.get("path", "")).startswith(PROTECTED):
            await self.app(scope, receive, send)
            return
        credential = read_authorization(headers)
        if credential.ambiguous:
            await _refuse(
                400, INVALID_REQUEST, "Send exactly one Authorization header", scope, receive, send
            )
            return
        if credential.token is None and str(scope.get("path", "")).startswith("/ui/api"):
            page = cookie_parser(headers.get("cookie", "")).get(COOKIE)  # the run view signed in (OAuth)
            credential = dataclasses.replace(credential, page=page or None)
        try:
            principal = await self.auth.principal(credential)
        except Refusal as refusal:
            await refusal.response()(scope, receive, send)
            return
        authenticated(scope, principal)
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await self._too_large(scope, receive, send)
            return
        posted = scope.get("method") == "POST"
        if not posted and self.scope_of is not None:
            short = self.auth.refuse_scope(principal, GET_SCOPES.get(str(scope.get("path", "")), "ice:read"))
            if short is not None:
                await short.response()(scope, receive, send)
                return
        if posted and (length is None or self.scope_of is not None):
            # Read the body here (up to the cap): a chunked one, or one whose call decides the scope needed.
            body, complete = await _read_capped(receive, self.max_body)
            if not complete:
                await self._too_large(scope, receive, send)
                return
            if self.scope_of is not None:
                message = await bodies.off_loop(bodies.try_decode, body)  # a big body: in a worker thread
                short = self.auth.refuse_scope(principal, self.scope_of(str(scope.get("path", "")), message))
                if short is not None:
                    await short.response()(scope, receive, send)
                    return
            receive = replay(body, receive)
        with acting_as(principal.id if self.auth.isolates else None,  # OAuth: each user sees their own
                       scopes=principal.scopes):
            await self.app(scope, receive, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _refuse(413, INVALID_REQUEST, "Request body too large", scope, receive, send)


async def _refuse(
    status: int, code: int, message: str, scope: Scope, receive: Receive, send: Send
) -> None:
    await JSONResponse(error_body(code, message), status_code=status)(scope, receive, send)


async def _read_capped(receive: Receive, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message.get("type") != "http.request":
            return b"".join(chunks), True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True


def replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
