"""`ice-mcp ui`: the run view on its own, over a data folder that a stdio server (Claude Desktop) writes."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.errors import IceError
from ice_mcp.server.web.serving import bind_listener, serve_http
from ice_mcp.settings import Settings

if TYPE_CHECKING:
    from ice_mcp.orchestrator import Orchestrator

DEFAULT_PORT = 8001


def add_ui_command(subparsers: Any) -> None:
    ui = subparsers.add_parser("ui", help="serve the browser run view over a data folder (read-only "
                                          "unless the admin token is given)")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=DEFAULT_PORT)
    ui.add_argument("--data-dir", type=Path, help="where runs are kept (ICE_MCP_DATA_DIR)")
    ui.add_argument("--state", metavar="URL", help="the run store a cluster shares: redis://HOST:PORT/DB or postgresql://... (ICE_MCP_STATE)")
    ui.add_argument("--workspace", type=Path, help="the folder file tools may use (ICE_MCP_WORKSPACE)")
    add_catalogue_arguments(ui, "register blueprints from DIR (the catalogue, and runs started here)")
    ui.add_argument("--allowed-host", action="append", default=[], help="extra Host header value to accept")
    ui.add_argument("--log-level", default=os.environ.get("ICE_MCP_LOG_LEVEL", "WARNING"))
    ui.set_defaults(handler=run_ui)


def add_catalogue_arguments(parser: argparse.ArgumentParser, blueprints_help: str) -> None:
    """`--tools`, `--blueprints` and `--templates`: what a serving command registers."""
    parser.add_argument("--tools", action="append", default=[], metavar="MODULE", help="import a tool module")
    parser.add_argument("--blueprints", action="append", default=[], metavar="DIR", help=blueprints_help)
    parser.add_argument("--templates", action="store_true", help="register the bundled blueprint templates too")


def create_viewer_app(orc: Any, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT,
                      token: str | None = None, admin_token: str | None = None,
                      allowed_hosts: list[str] | None = None) -> Any:
    """The page and its API alone (a Starlette app), behind the same Guard as `/mcp` (Host/Origin, token)."""
    # Imported here: the command line lists `ui` without loading the web stack.
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from ice_mcp.server.auth.authenticators import StaticTokens
    from ice_mcp.server.web.guard import DEFAULT_MAX_BODY, Guard, security_settings
    from ice_mcp.server.web.ui.routes import UiConfig, ui_routes

    token = token if token is not None else (os.environ.get("ICE_MCP_TOKEN") or None)
    admin_token = admin_token if admin_token is not None else (os.environ.get("ICE_MCP_ADMIN_TOKEN") or None)
    security = TransportSecurityMiddleware(security_settings(host, port, allowed_hosts))
    config = UiConfig(admin_token=admin_token, start_needs_admin=True, mode="viewer", token_configured=bool(token))

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "workflows": len(orc.registry.workflows)})

    app = Starlette(routes=[*ui_routes(orc, config, security), Route("/healthz", healthz, methods=["GET"])])
    app.add_middleware(Guard, auth=StaticTokens(token, admin_token), max_body=DEFAULT_MAX_BODY)
    return app


def _orchestrator(args: argparse.Namespace) -> Orchestrator:
    """An orchestrator on the data folder: the catalogue, and runs started or retried from the page.
    Unlike a server it adopts no orphaned runs: opening a viewer never executes anything by itself."""
    # The engine: not for a command line that only parses.
    from ice_mcp.assembly import build_orchestrator, load_blueprint_folders

    orc = build_orchestrator(Settings.from_env(data_dir=args.data_dir, workspace=args.workspace,
                                               state_url=args.state), tools=args.tools)
    for problem in load_blueprint_folders(orc, args.blueprints, templates=args.templates):
        logging.getLogger("ice_mcp.server").warning("blueprint not registered: %s", problem.message)
    orc.restore_blueprints()
    return orc


async def _serve(args: argparse.Namespace) -> None:
    with bind_listener(args.host, args.port) as listener:
        orc = _orchestrator(args)
        try:
            port = listener.getsockname()[1]
            app = create_viewer_app(orc, host=args.host, port=port, allowed_hosts=args.allowed_host)
            admin = bool(os.environ.get("ICE_MCP_ADMIN_TOKEN"))
            url_host = f"[{args.host}]" if ":" in args.host else args.host
            where = orc.store.location if orc.store is not None else "(no run store)"

            def announce() -> None:
                print(f"ice_mcp: run view at http://{url_host}:{port}/ui over {where}\n"
                      f"ice_mcp: {'cancel, retry and start need the admin token (ICE_MCP_ADMIN_TOKEN)' if admin else 'read-only: set ICE_MCP_ADMIN_TOKEN to cancel, retry and start runs'}",
                      file=sys.stderr, flush=True)

            await serve_http(app, listener, args.log_level, on_started=announce)
        finally:
            await orc.aclose(suspend=True)  # runs started here go on in the next server on this folder


def run_server(serve: Callable[[argparse.Namespace], Coroutine[Any, Any, None]], args: argparse.Namespace) -> int:
    """Log to stderr at `--log-level` and run `serve(args)` until it returns or Ctrl-C: 0, or 1 once an
    IceError is printed."""
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
    except IceError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    return 0


def run_ui(args: argparse.Namespace) -> int:
    return run_server(_serve, args)
