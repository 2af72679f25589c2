"""Connections to real upstream servers when things go wrong: a process killed mid-call, a cancelled run,
node retries, an HTTP server that restarts (its session dropped), and secrets that stay out of records."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from upstream_servers import (
    EVERYTHING,
    NODE,
    Connect,
    everything,
    everything_http,
    free_port,
    process_with,
)

from ice_mcp import Orchestrator

pytestmark = pytest.mark.usefixtures("servers_installed")

LONG = {"id": "op", "type": "tool", "tool_name": "everything.trigger-long-running-operation",
        "tool_args": {"duration": 20, "steps": 40}}
ECHO = {"name": "echo_once", "nodes": [{"id": "echo", "type": "tool", "tool_name": "everything.echo",
                                        "tool_args": {"message": "again"}}]}


async def until(predicate: Callable[[], Any], timeout: float = 15.0) -> Any:
    for _ in range(int(timeout / 0.02)):
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {predicate}")


def progressed(events: list[Any]) -> bool:
    return any(e.type == "node_event" and e.data.get("event") == "progress" for e in events)


def connections(orc: Orchestrator, server: str) -> int:
    assert orc.services.upstream is not None
    return orc.services.upstream.servers[server].connects


async def test_a_process_killed_mid_call_fails_the_node_readably_and_the_next_call_reconnects(
        connect: Connect) -> None:
    marker = f"kill-me-{uuid.uuid4().hex}"
    orc = await connect({"everything": everything(marker)})
    events: list[Any] = []
    handle = await orc.start({"name": "long", "nodes": [LONG]}, on_event=events.append)
    await until(lambda: progressed(events))  # the call is in flight upstream
    os.kill(process_with(marker) or 0, signal.SIGKILL)
    record = await asyncio.wait_for(handle.wait(), 15)
    assert record.status == "failed"
    error = record.nodes["op"].error
    assert error is not None and error["code"] == "upstream_unavailable"
    assert error["message"] == ("everything.trigger-long-running-operation: the MCP server 'everything' stopped "
                                "during the call (connection closed); it is started again on the next call")
    again = await orc.run(ECHO)
    assert again.status == "succeeded" and again.nodes["echo"].output == {"text": "Echo: again"}
    assert connections(orc, "everything") == 2
    assert process_with(marker) is not None  # a new process, with the same command line


async def test_node_retries_apply_to_upstream_calls(connect: Connect) -> None:
    marker = f"retry-me-{uuid.uuid4().hex}"
    waits: list[float] = []

    async def no_wait(seconds: float) -> None:
        waits.append(seconds)

    orc = await connect({"everything": everything(marker)}, sleep=no_wait)
    events: list[Any] = []
    node = {**LONG, "tool_args": {"duration": 3, "steps": 30}, "retries": 1}
    handle = await orc.start({"name": "long", "nodes": [node]}, on_event=events.append)
    await until(lambda: progressed(events))
    os.kill(process_with(marker) or 0, signal.SIGKILL)
    record = await asyncio.wait_for(handle.wait(), 30)
    assert record.status == "succeeded", record.error
    assert record.nodes["op"].attempts == 2 and len(waits) == 1
    assert connections(orc, "everything") == 2


async def test_cancelling_a_run_cancels_the_upstream_call(connect: Connect, tmp_path: Path) -> None:
    wire = tmp_path / "wire.jsonl"  # every message server-everything reads, copied by tee(1) on its stdin
    recorded = {"command": "/bin/sh", "args": ["-c", 'tee -a "$WIRE" | exec "$NODE" "$SERVER" stdio'],
                "env": {"WIRE": str(wire), "NODE": str(NODE), "SERVER": str(EVERYTHING)}}
    orc = await connect({"everything": recorded})
    events: list[Any] = []
    handle = await orc.start({"name": "long", "nodes": [LONG]}, on_event=events.append)
    await until(lambda: progressed(events))

    def received() -> list[dict[str, Any]]:
        return [json.loads(line) for line in wire.read_text().splitlines() if line.strip()]

    [call] = [m for m in received() if m.get("method") == "tools/call"]
    assert handle.cancel()
    record = await asyncio.wait_for(handle.wait(), 10)
    assert record.status == "cancelled"
    cancelled = await until(lambda: [m for m in received() if m.get("method") == "notifications/cancelled"])
    assert cancelled[0]["params"]["requestId"] == call["id"]
    again = await orc.run(ECHO)  # the connection is still good for the next run
    assert again.status == "succeeded" and connections(orc, "everything") == 1


async def test_an_http_server_that_restarts_is_reconnected_and_its_token_stays_secret(
        connect: Connect, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = f"token-{uuid.uuid4().hex}"
    monkeypatch.setenv("EVERYTHING_TOKEN", token)
    port = free_port()
    events: list[Any] = []
    with everything_http(port) as url:
        orc = await connect({"everything": {"type": "http", "url": url, "bearerTokenEnv": "EVERYTHING_TOKEN"}})
        first = await orc.run(ECHO, on_event=events.append)
    assert first.status == "succeeded", first.error
    with everything_http(port):  # a new process: the session ice_mcp held is gone
        second = await orc.run(ECHO, on_event=events.append)
    assert second.status == "succeeded", second.error
    assert second.nodes["echo"].output == {"text": "Echo: again"}
    assert connections(orc, "everything") == 2
    written = json.dumps([first.to_dict(), second.to_dict(), [e.to_dict() for e in events]])
    assert token not in written and token not in caplog.text


async def test_a_missing_token_variable_is_named_not_guessed(connect: Connect) -> None:
    orc = await connect({"remote": {"url": "http://127.0.0.1:9/mcp", "bearerTokenEnv": "ICE_MCP_TEST_UNSET_TOKEN"}})
    report = orc.validate({"name": "r", "nodes": [{"id": "x", "type": "tool", "tool_name": "remote.search"}]})
    assert report.errors[0].message == (
        "no tool named 'remote.search' (MCP server 'remote': environment variable ICE_MCP_TEST_UNSET_TOKEN "
        "(its bearer token) is not set)")
