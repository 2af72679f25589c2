"""The HTTP app: `/mcp` (Streamable HTTP, both eras), `/rpc` (JSON-RPC 2.0), `/ui` (the run view), `/healthz`,
`/metrics` (Prometheus), and `/` saying where those are."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from ice_mcp.operations.builtins import BUILTINS
from ice_mcp.principals import ACTING
from ice_mcp.server.auth.authenticators import (
    TICKET_SECONDS,
    Authenticator,
    OAuthTokens,
    PageSessions,
    StaticTokens,
    needed_scope,
)
from ice_mcp.server.auth.callers import caller_id, may_administer
from ice_mcp.server.auth.resource_server import Principal, TokenVerifier
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.server import build_server
from ice_mcp.server.web.guard import DEFAULT_MAX_BODY, Guard, security_settings
from ice_mcp.server.web.hooks import hook_routes
from ice_mcp.server.web.rpc import INVALID_REQUEST, RpcCaller, error_body, handle_rpc, rpc_methods
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
        caller = RpcCaller(caller_id(request), may_administer(request, options))  # budgets are per caller
        response = await handle_rpc(body, methods, caller)
        if response is None:
            return Response(status_code=204)
        return Response(json.dumps(response, default=str), media_type="application/json")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "workflows": len(orc.registry.workflows)})

    async def root(request: Request) -> Response:
        # A browser goes to the run view; anything else learns where the endpoints are.
        if "text/html" in request.headers.get("accept", ""):
            return RedirectResponse("/ui", status_code=307)
        return JSONResponse({"name": options.name, "version": options.version, "mcp": "/mcp", "ui": "/ui",
                             "rpc": "/rpc", "health": "/healthz", "metrics": "/metrics"})

    async def metrics(request: Request) -> Response:
        # The Guard asked for the token (PROTECTED); the Host/Origin allow-list is each route's, as for /rpc.
        rejected = await security.validate_request(request)
        if rejected is not None:
            return rejected
        body, content_type = orc.prometheus.exposition(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type, "Cache-Control": "no-store"})

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
    auth: Authenticator = StaticTokens(token, options.admin_token)
    extra_routes: list[Route] = []
    scope_of, pages = None, None
    if options.oauth is not None:
        oauth = OAuthTokens(options.oauth, TokenVerifier(options.oauth))
        auth, scope_of, pages = oauth, _scope_of(server), oauth.pages
        extra_routes = [*oauth.routes(), pages.route()]
    server.ice_calls.ui_link = _ui_link(orc, pages)
    app = Starlette(
        routes=[
            *extra_routes,
            Route("/mcp", SessionEndpoint(manager, token_configured=bool(token) or options.oauth is not None)),
            Route("/rpc", rpc, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/", root, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            *_counted(hook_routes(orc), orc.prometheus.hook_delivery),
            *ui_routes(orc, _ui_config(orc, server, options, token_configured=bool(token)), security),
        ],
        lifespan=lambda _app: manager.run(),
    )
    app.add_middleware(Guard, auth=auth, max_body=max_body, scope_of=scope_of)
    app.state.ice_server = server
    app.state.session_manager = manager
    return app


def _counted(routes: list[Route], count: Callable[[int], None]) -> list[Route]:
    """The webhook routes, each answer's status counted (ice_hook_deliveries_total) by the server that got it."""

    def counting(endpoint: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        async def counted(request: Request) -> Response:
            response = await endpoint(request)
            count(response.status_code)
            return response

        return counted

    return [Route(route.path, counting(route.endpoint), methods=route.methods) for route in routes]


def _ui_link(orc: Any, pages: PageSessions | None) -> Callable[[], dict[str, Any]]:
    """The `ui_link` tool's answer: the run view's address; with OAuth, a one-time sign-in for the caller."""

    def link() -> dict[str, Any]:
        base, acting = orc.hooks.base_url, ACTING.get()
        if pages is None or acting is None:
            return {"url": f"{base}/ui", "expires_in_seconds": None}
        ticket = pages.mint(Principal(acting.id, acting.scopes))
        return {"url": f"{base}/ui/#ticket={ticket}", "expires_in_seconds": int(TICKET_SECONDS)}

    return link


def _scope_of(server: Any) -> Callable[[str, Any], str]:
    """The OAuth scope a request to /mcp or /rpc needs: its tool's, or its /rpc method's."""
    catalogue = server.ice_calls.catalogue
    by_method = {tool.rpc: f"ice:{tool.scope}" for tool in BUILTINS if tool.rpc}

    def tool_scope(name: str) -> str:
        entry = catalogue.resolve(name)
        return entry.scope if entry is not None else "ice:read"  # unknown: the call answers so itself

    def rpc_scope(method: str) -> str:
        return "ice:run" if method == "workflow.run" else by_method.get(method, "ice:read")

    return lambda path, message: needed_scope(path, message, tool_scope, rpc_scope)


def _ui_config(orc: Any, server: Any, options: ServerOptions, *, token_configured: bool = False) -> UiConfig:
    """The page may start what `/mcp` may run (read-only: only read-only workflows)."""
    calls = server.ice_calls

    def startable(name: str) -> bool:
        tool = calls.catalogue.resolve(f"workflow:{name}")
        return tool is not None and calls.refusal(tool) is None

    return UiConfig(admin_token=options.admin_token, read_only=options.read_only, startable=startable,
                    oauth=options.oauth is not None, token_configured=token_configured,
                    workspace=str(orc.settings.workspace.resolve()))
