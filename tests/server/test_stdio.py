"""Over stdio, as Claude Desktop runs it: a real `python -m ice_mcp.server serve` subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp_helpers import ROOT, structured, subprocess_env, write_blueprints
from test_surface import NEW_BLUEPRINT

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def stdio_params(tmp_path: Path, *extra: str) -> StdioServerParameters:
    blueprints = write_blueprints(tmp_path / "blueprints")
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "ice_mcp",
            "serve",
            "--tools",
            "mcp_fixture_tools",
            "--blueprints",
            str(blueprints),
            *extra,
        ],
        env=subprocess_env(tmp_path),
        cwd=str(ROOT),
    )


async def until_status(client: Client, run_id: str) -> dict[str, Any]:
    for _ in range(500):
        record = structured(await client.call_tool("run_status", {"run_id": run_id}))
        if record["status"] != "running":
            return record
        await asyncio.sleep(0.02)
    raise AssertionError("run never finished")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_stdio_end_to_end(tmp_path: Path, mode: str) -> None:
    changed: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(stdio_params(tmp_path), mode=mode, message_handler=on_message) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        names = [t.name for t in (await client.list_tools()).tools]
        assert all(NAME.match(n) for n in names)
        assert {"workflow_steps", "workflow_broken", "tool_echo", "blueprint_register"} <= set(
            names
        )

        ok = await client.call_tool(
            "workflow_steps", {"word": "stdio"}, progress_callback=on_progress
        )
        assert structured(ok)["outputs"] == {"upper": "STDIO"}
        assert structured(await client.call_tool("workflow:steps", {"word": "c"}))["outputs"] == {
            "upper": "C"
        }
        for _ in range(100):
            if len(progress) >= 4:
                break
            await asyncio.sleep(0.02)
        assert progress == [1.0, 2.0, 3.0, 4.0]

        failed = await client.call_tool("workflow_broken", {})
        assert failed.is_error is True and "explode" in failed.content[1].text
        with pytest.raises(MCPError):
            await client.call_tool("workflow_missing", {})
        bad = await client.call_tool("workflow_steps", {"word": 3})
        assert bad.is_error is True and "word" in bad.content[1].text

        first = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05, "idempotency_key": "same"})
        )
        again = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05, "idempotency_key": "same"})
        )
        assert first["run_id"] == again["run_id"]

        call = asyncio.create_task(client.call_tool("workflow_slow", {"seconds": 60}))
        running: list[dict[str, Any]] = []
        for _ in range(500):
            running = structured(await client.call_tool("run_list", {"status": "running"}))["runs"]
            if running:
                break
            await asyncio.sleep(0.02)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await call
        assert (await until_status(client, running[0]["run_id"]))["status"] == "cancelled"

        if mode == "legacy":
            await client.call_tool("blueprint_register", {"blueprint": NEW_BLUEPRINT})
            for _ in range(200):
                if changed:
                    break
                await asyncio.sleep(0.02)
            assert changed
        else:
            async with client.listen(tools_list_changed=True) as subscription:
                await client.call_tool(
                    "blueprint_register", {"blueprint": json.dumps(NEW_BLUEPRINT)}
                )
                assert await asyncio.wait_for(anext(aiter(subscription)), timeout=30) is not None
        assert "workflow_fresh" in {
            t.name for t in (await client.list_tools(cache_mode="bypass")).tools
        }
        await client.call_tool("blueprint_delete", {"name": "fresh"})
        assert "workflow_fresh" not in {
            t.name for t in (await client.list_tools(cache_mode="bypass")).tools
        }

        doc = (await client.read_resource("ice://docs/getting-started")).contents[0]
        assert isinstance(doc, types.TextResourceContents) and "Getting started" in doc.text
        prompt = await client.get_prompt("harden_workflow", {"workflow": "slow"})
        assert "sleep" in prompt.messages[0].content.text  # type: ignore[union-attr]


async def test_read_only_stdio_refuses_catalogue_changes(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path, "--read-only"), mode="legacy") as client:
        assert "blueprint_register" not in {t.name for t in (await client.list_tools()).tools}
        refused = await client.call_tool("blueprint_register", {"blueprint": NEW_BLUEPRINT})
        assert refused.is_error is True


def test_stdout_carries_only_mcp(tmp_path: Path) -> None:
    """Logs go to stderr: every stdout line is a JSON-RPC message."""
    import subprocess

    params = stdio_params(tmp_path, "--log-level", "DEBUG")
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    lines = [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines.append(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "workflow_steps", "arguments": {"word": "x"}},
        }
    )
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=params.env,
        cwd=params.cwd,
    )
    assert proc.stdin is not None and proc.stdout is not None
    for line in lines:
        proc.stdin.write(json.dumps(line) + "\n")
    proc.stdin.flush()
    out = [json.loads(proc.stdout.readline()) for _ in range(2)]
    proc.stdin.close()
    rest = proc.stdout.read()
    proc.wait(timeout=60)
    stderr = proc.stderr.read() if proc.stderr is not None else ""
    assert [m.get("id") for m in out] == [1, 2]
    assert out[1]["result"]["structuredContent"]["outputs"] == {"upper": "X"}
    assert rest == ""
    assert "DEBUG" in stderr  # the logs went to stderr


def test_claude_config_has_absolute_paths() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "ice_mcp", "claude-config"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=subprocess_env(Path("/tmp")),
        check=True,
    )
    server = json.loads(done.stdout)["mcpServers"]["ice-mcp"]
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    assert "serve" in server["args"]


async def test_the_claude_desktop_config_never_serves_the_current_folder(tmp_path: Path) -> None:
    """Claude Desktop may start the server in `/`: the printed config names its own workspace."""
    import subprocess

    env = {**subprocess_env(tmp_path), "HOME": str(tmp_path / "home")}
    env.pop("ICE_MCP_WORKSPACE")
    done = subprocess.run([sys.executable, "-m", "ice_mcp", "claude-config"], capture_output=True, text=True,
                          cwd=ROOT, env=env, check=True)
    server = json.loads(done.stdout)["mcpServers"]["ice-mcp"]
    workspace = Path(server["args"][server["args"].index("--workspace") + 1])
    assert workspace == tmp_path / "home" / "ice-mcp-workspace" and workspace.is_dir()
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env={**env, **server.get("env", {})}, cwd="/")
    async with Client(params) as client:
        for path in ("/etc/hostname", "etc/hostname", "../../../etc/hostname"):
            answer = await client.call_tool("tool_file_read", {"path": path})
            assert answer.is_error is True, (path, answer.content)
        written = await client.call_tool("tool_file_write", {"path": "note.txt", "text": "x"})
        assert written.is_error is False, written.content
    assert (workspace / "note.txt").read_text() == "x" and not Path("/note.txt").exists()
