"""What stands in front of every HTTP route: Host/Origin checks, the bearer token and a body-size cap."""

from __future__ import annotations

from typing import Any

from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ice_mcp.server.access import read_authorization, same_secret
from ice_mcp.server.edges import valid_host, valid_origin
from ice_mcp.server.web.rpc import INVALID_REQUEST, error_body

DEFAULT_MAX_BODY = 4 * 1024 * 1024
PROTECTED = ("/mcp", "/rpc", "/ui/api")  # the /ui page and its assets hold no data: a browser loads them unasked


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
    """Strict Host/Origin, one `Authorization`, the bearer token (when configured) and a body cap."""

    def __init__(
        self, app: ASGIApp, *, token: str | None, admin_token: str | None, max_body: int
    ) -> None:
        self.app = app
        self.token = token
        self.admin_token = admin_token
        self.max_body = max_body

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
        if self.token and not (
            same_secret(credential.token, self.token)
            or same_secret(credential.token, self.admin_token)
        ):
            await JSONResponse(
                error_body(-32001, "Unauthorized: send Authorization: Bearer <token>"),
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="ice-mcp"'},
            )(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await self._too_large(scope, receive, send)
            return
        if length is None and scope.get("method") == "POST":
            # A chunked body: read it here (up to the cap) and replay it to the app.
            body, complete = await _read_capped(receive, self.max_body)
            if not complete:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, replay(body, receive), send)
            return
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
