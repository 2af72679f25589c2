"""Cancellation follows each protocol era, over real HTTP: on a 2025-11-25 session a dropped connection (and the
session ended after it) leaves the run going, `notifications/cancelled` cancels it; on 2026-07-28 closing the
stream cancels it. And a client that gives up after 5 s (openai-agents' default) gets `running` first from a
server started as the README says, with how to follow the run."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx2
from live import live_server
from mcp_helpers import http_client, structured

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LEGACY, MODERN = "2025-11-25", "2026-07-28"
CALL_ID = 2


def slow_call(seconds: float, version: str) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "workflow_slow", "arguments": {"seconds": seconds}}
    if version == MODERN:
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": CALL_ID, "method": "tools/call", "params": params}


async def legacy_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """A 2025-11-25 session opened by hand: the headers its requests carry."""
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    answer = await http.post(url, headers=ACCEPT, json=hello)
    headers = {**ACCEPT, "mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": LEGACY}
    await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


@contextlib.asynccontextmanager
async def call_in_flight(http: httpx2.AsyncClient, url: str, headers: dict[str, str],
                         body: dict[str, Any]) -> AsyncIterator[asyncio.Task[None]]:
    """A tools/call whose response stream is read until the block drops it (the task cancelled: the
    connection closes without a word to the server)."""

    async def read() -> None:
        async with http.stream("POST", url, headers=headers, json=body) as response:
            async for _ in response.aiter_bytes():
                pass

    task = asyncio.create_task(read())
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx2.HTTPError):
            await task


async def until(check: Callable[[], Any], attempts: int = 600) -> Any:
    """The first truthy value of `check()` (an awaitable's result), polling every 50 ms."""
    for _ in range(attempts):
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError("never happened")


async def the_run(base: str, status: str | None = None) -> dict[str, Any]:
    """The one run of this fresh server (with that status), asked through another session."""

    async def look() -> dict[str, Any] | None:
        async with http_client(base, mode="legacy") as client:
            runs = structured(await client.call_tool("run_list", {}))["runs"]
        return next((run for run in runs if status is None or run["status"] == status), None)

    found: dict[str, Any] = await until(look)
    return found


async def result_of(base: str, run_id: str) -> dict[str, Any]:
    async with http_client(base, mode="legacy") as client:
        while True:  # each call waits up to the server's budget; a run still going answers running
            envelope = structured(await client.call_tool("run_result", {"run_id": run_id, "wait_seconds": 20}))
            if envelope["status"] not in ("running", "queued"):
                return envelope


async def test_a_2025_session_that_drops_its_connection_leaves_the_run_going(tmp_path: Path) -> None:
    with live_server(tmp_path) as base:
        url = f"{base}/mcp"
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = await legacy_session(http, url)
            async with call_in_flight(http, url, headers, slow_call(8, LEGACY)):
                run = await the_run(base, "running")
                await asyncio.sleep(3)  # 3 s into the 8 s call, as a client that loses its network
            # The session is ended too (a client that comes back opens another): not a cancellation either.
            await http.delete(url, headers=headers)
        envelope = await result_of(base, run["run_id"])
    assert envelope["status"] == "succeeded", envelope
    assert envelope["outputs"] == {"slept": 8}


async def test_a_2025_notifications_cancelled_cancels_the_run(tmp_path: Path) -> None:
    with live_server(tmp_path) as base:
        url = f"{base}/mcp"
        async with httpx2.AsyncClient(timeout=30) as http:
            headers = await legacy_session(http, url)
            async with call_in_flight(http, url, headers, slow_call(60, LEGACY)):
                run = await the_run(base, "running")
                await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                                             "params": {"requestId": CALL_ID, "reason": "test"}})
                cancelled = await the_run(base, "cancelled")
    assert cancelled["run_id"] == run["run_id"]


async def test_a_2026_call_whose_stream_closes_cancels_the_run(tmp_path: Path) -> None:
    with live_server(tmp_path) as base:
        url = f"{base}/mcp"
        headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "workflow_slow"}
        async with httpx2.AsyncClient(timeout=30) as http:
            async with call_in_flight(http, url, headers, slow_call(60, MODERN)):
                run = await the_run(base, "running")
            cancelled = await the_run(base, "cancelled")
    assert cancelled["run_id"] == run["run_id"]


async def test_a_client_that_waits_5_s_gets_running_then_follows_the_run(tmp_path: Path) -> None:
    # The README's advice for openai-agents (5 s client_session_timeout_seconds): serve with --wait-seconds 3.
    with live_server(tmp_path, "--wait-seconds", "3") as base:
        async with http_client(base, mode="legacy", read_timeout_seconds=5) as client:
            answer = await client.call_tool("workflow_slow", {"seconds": 8})
        envelope = structured(answer)
        assert envelope["status"] == "running"
        run_id = envelope["run_id"]
        text = answer.content[1].text  # type: ignore[union-attr]
        assert f'run_result(run_id="{run_id}")' in text
        assert re.search(rf"http://127\.0\.0\.1:\d+/ui/#/runs/{run_id}$", text), text
        final = await result_of(base, run_id)
    assert final["status"] == "succeeded" and final["outputs"] == {"slept": 8}


async def test_openai_agents_with_its_default_timeout_gets_running_then_the_success(tmp_path: Path) -> None:
    """The real openai-agents client (its default 5 s client_session_timeout_seconds) against a server set up as
    the README says for it (--wait-seconds 3): an 8 s workflow answers `running` in time, then run_result."""
    from agents.mcp import MCPServerStreamableHttp

    with live_server(tmp_path, "--wait-seconds", "3") as base:
        server = MCPServerStreamableHttp({"url": f"{base}/mcp"}, name="ice_mcp")
        assert server.client_session_timeout_seconds == 5  # its default, untouched
        async with server:
            answer = await server.call_tool("workflow_slow", {"seconds": 8})
            envelope = json.loads(answer.content[0].text)  # type: ignore[union-attr]
            assert envelope["status"] == "running" and envelope["run_id"]
            for _ in range(30):  # each run_result waits up to the server's 3 s
                final = json.loads((await server.call_tool(
                    "run_result", {"run_id": envelope["run_id"]})).content[0].text)  # type: ignore[union-attr]
                if final["status"] != "running":
                    break
    assert final["status"] == "succeeded" and final["outputs"] == {"slept": 8}
