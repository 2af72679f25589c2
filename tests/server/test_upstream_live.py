"""`ice-mcp serve --http --mcp-config FILE` as a real process: upstream tools re-exported under client-safe
names only with --expose-upstream, filtered by their own annotations on a read-only server, and a slow or
dying upstream server never stalls ice_mcp (another client's /healthz keeps answering)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from live import healthz_watch, live_server
from mcp_helpers import ROOT, http_client, structured

sys.path.insert(0, str(ROOT / "tests" / "upstream"))  # the upstream servers' entries and helpers
from upstream_servers import everything, process_with, require_servers, time_server, write_config

CLIENT_SAFE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@pytest.fixture(scope="module", autouse=True)
def servers_installed() -> None:
    require_servers()


async def tool_names(url: str) -> list[str]:
    async with http_client(url) as client:
        return [tool.name for tool in (await client.list_tools()).tools]


async def test_expose_upstream_re_exports_upstream_tools_and_a_dying_upstream_stalls_nothing(tmp_path: Path) -> None:
    marker = f"live-{uuid.uuid4().hex}"
    config = write_config(tmp_path / "mcp.json", {"everything": everything(marker), "time": time_server()})
    with live_server(tmp_path / "ws", "--mcp-config", str(config), "--expose-upstream") as url:
        names = await tool_names(url)
        upstream = [n for n in names if n.startswith(("tool_everything__", "tool_time__"))]
        assert {"tool_time__get_current_time", "tool_everything__echo", "tool_everything__get-sum"} <= set(upstream)
        assert all(CLIENT_SAFE.match(name) for name in upstream)
        async with http_client(url) as client:
            summed = structured(await client.call_tool("tool_everything__get-sum", {"a": 2, "b": 40}))
            assert summed["status"] == "succeeded" and summed["outputs"] == {
                "result": {"text": "The sum of 2 and 40 is 42."}}
            refused = await client.call_tool("tool_everything__get-sum", {"a": "2"})
            assert refused.is_error and "b" in refused.content[0].text

            call = asyncio.create_task(client.call_tool(
                "tool_everything__trigger-long-running-operation", {"duration": 30, "steps": 30}))
            with healthz_watch(url) as watch:
                await asyncio.sleep(1.0)  # the upstream call is in flight; then its process dies
                os.kill(process_with(marker) or 0, signal.SIGKILL)
                result = await asyncio.wait_for(call, 15)
            watch.assert_responsive()
            text = " ".join(getattr(block, "text", "") for block in result.content)
            assert result.is_error and "stopped during the call" in text and "Traceback" not in text
            again = structured(await client.call_tool("tool_everything__echo", {"message": "back"}))
            assert again["outputs"] == {"result": {"text": "Echo: back"}}


async def test_upstream_tools_stay_private_unless_exposed_and_read_only_follows_their_hints(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", {"everything": everything()})
    with live_server(tmp_path / "plain", "--mcp-config", str(config)) as url:
        names = await tool_names(url)
        assert not [n for n in names if "everything" in n]
        async with http_client(url) as client:
            # Workflows still use them: an ad-hoc blueprint over MCP calls the upstream tool.
            blueprint: dict[str, Any] = {"name": "via_blueprint", "nodes": [
                {"id": "e", "type": "tool", "tool_name": "everything.echo", "tool_args": {"message": "inside"}}],
                "outputs": {"said": "{{ e.text }}"}}
            ran = structured(await client.call_tool("blueprint_run", {"blueprint": blueprint}))
            assert ran["status"] == "succeeded" and ran["outputs"] == {"said": "Echo: inside"}
    with live_server(tmp_path / "ro", "--mcp-config", str(config), "--expose-upstream", "--read-only") as url:
        names = await tool_names(url)
        assert "tool_everything__echo" in names  # readOnlyHint: true upstream
        assert "tool_everything__toggle-simulated-logging" not in names  # readOnlyHint: false upstream
