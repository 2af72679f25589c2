"""An MCP Apps client's workflow call answers within a couple of seconds with the run still going (the run view
under the call follows it); a client without Apps keeps the whole wait."""

from __future__ import annotations

from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp_helpers import make_options, structured

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server


async def test_an_apps_client_gets_the_running_run_and_others_the_result(orc: Orchestrator) -> None:
    server = build_server(orc, make_options(wait_seconds=60))
    apps = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
    async with Client(server, mode="auto", extensions=apps) as with_apps, Client(server, mode="auto") as plain:
        shown = structured(await with_apps.call_tool("workflow_slow", {"seconds": 6}))
        waited = structured(await plain.call_tool("workflow_slow", {"seconds": 0.5}))
        assert shown["status"] == "running" and shown["run_id"]  # the view follows it from here
        assert waited["status"] == "succeeded"
        done = structured(await with_apps.call_tool("run_result", {"run_id": shown["run_id"], "wait_seconds": 30}))
        assert done["status"] == "succeeded"
        # A quick run still answers finished: the cap only shortens a long wait.
        assert structured(await with_apps.call_tool("workflow_slow", {"seconds": 0.1}))["status"] == "succeeded"
