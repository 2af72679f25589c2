"""The HTTP app: `/mcp` (Streamable HTTP, both eras), `/rpc` (JSON-RPC 2.0), `/ui` (the run view), `/healthz`."""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ice_mcp.server.access import caller_id
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.server import build_server
from ice_mcp.server.web.guard import DEFAULT_MAX_BODY, Guard, security_settings
from ice_mcp.server.web.hooks import hook_routes
from ice_mcp.server.web.rpc import INVALID_REQUEST, error_body, handle_rpc, rpc_methods
from ice_mcp.server.web.sessions import LimitedSessionManager, SessionEndpoint
from ice_mcp.server.web.ui.routes import UiConfig, ui_routes


def create_http_app(
    orc: Any,
    options: ServerOptions | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    stateless: bool = False,
    json_response: bool = False,
    token: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    allowed_hosts: list[str] | None = None,
) -> Starlette:
    """The Starlette app serving `orc`. `token` defaults to ICE_MCP_TOKEN."""
    options = options or ServerOptions()
    token = token if token is not None else (os.environ.get("ICE_MCP_TOKEN") or None)
    server = build_server(orc, options)
    settings = security_settings(host, port, allowed_hosts)
    orc.hooks.base_url = orc.settings.public_url or f"http://{host}:{port}"  # what webhook_create answers
    security = TransportSecurityMiddleware(settings)
    methods = rpc_methods(orc, server.ice_calls, read_only=options.read_only)

    async def rpc(request: Request) -> Response:
        rejected = await security.validate_request(request, is_post=True)
        if rejected is not None:
            return rejected
        if "application/json" not in request.headers.get("content-type", ""):
            return JSONResponse(
                error_body(INVALID_REQUEST, "Content-Type must be application/json"),
                status_code=415,
            )
        body = await request.body()
        if len(body) > max_body:
            return JSONResponse(
                error_body(INVALID_REQUEST, "Request body too large"), status_code=413
            )
        response = await handle_rpc(body, methods, caller_id(request))  # budgets are per caller
        if response is None:
            return Response(status_code=204)
        return Response(json.dumps(response, default=str), media_type="application/json")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "workflows": len(orc.registry.workflows)})

    manager = LimitedSessionManager(
        server,
        json_response=json_response,
        stateless=stateless,
        security_settings=settings,
        max_request_body_size=max_body,
        session_idle_timeout=options.session_idle_seconds,
        max_sessions=options.max_sessions,
        max_sessions_per_client=options.max_sessions_per_client,
    )
    app = Starlette(
        routes=[
            Route("/mcp", SessionEndpoint(manager, token_configured=bool(token))),
            Route("/rpc", rpc, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            *hook_routes(orc),
            *ui_routes(orc, _ui_config(server, options), security),
        ],
        lifespan=lambda _app: manager.run(),
    )
    app.add_middleware(Guard, token=token, admin_token=options.admin_token, max_body=max_body)
    app.state.ice_server = server
    app.state.session_manager = manager
    return app


def _ui_config(server: Any, options: ServerOptions) -> UiConfig:
    """The page may start what `/mcp` may run (read-only: only read-only workflows)."""
    calls = server.ice_calls

    def startable(name: str) -> bool:
        tool = calls.catalogue.resolve(f"workflow:{name}")
        return tool is not None and calls.refusal(tool) is None

    return UiConfig(admin_token=options.admin_token, read_only=options.read_only, startable=startable)
