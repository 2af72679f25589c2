"""The schedule tools over MCP (the official client, in memory), /rpc and the command line."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp_helpers import echo, make_options, structured

from ice_mcp.cli import main
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.server.web.rpc import handle_rpc, rpc_methods
from ice_mcp.settings import Settings
from ice_mcp.tools.registry import Registry

DAILY = {"name": "daily", "inputs": {"type": "object", "properties": {"topic": {"type": "string"}},
                                     "required": ["topic"]},
         "nodes": [{"id": "e", "type": "tool", "tool_name": "echo",
                    "tool_args": {"value": "{{ inputs.topic }} {{ trigger.kind }}"}}]}
SCHEDULE_TOOLS = {"schedule_preview", "schedule_create", "schedule_get", "schedule_list", "schedule_update",
                  "schedule_pause", "schedule_resume", "schedule_trigger", "schedule_backfill", "schedule_delete",
                  "schedule_history"}


@pytest.fixture
async def orc(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    orchestrator = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    orchestrator.registry.add_tool(echo)
    orchestrator.register_blueprint(DAILY)
    yield orchestrator
    await orchestrator.aclose()


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_the_tools_over_mcp_from_preview_to_delete(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) >= SCHEDULE_TOOLS
        assert listed["schedule_preview"].annotations.read_only_hint is True  # type: ignore[union-attr]

        preview = structured(await client.call_tool("schedule_preview", {
            "spec": {"cron": "0 9 * * MON", "timezone": "Europe/Paris"}, "count": 2, "from": "2026-11-25T00:00:00Z"}))
        assert preview["fires"] == [{"at": "2026-11-30T08:00:00Z", "local": "2026-11-30T09:00:00+01:00"},
                                    {"at": "2026-12-07T08:00:00Z", "local": "2026-12-07T09:00:00+01:00"}]
        assert "Monday" in preview["description"] and preview["timezone"] == "Europe/Paris"

        created = structured(await client.call_tool("schedule_create", {
            "workflow": "daily", "inputs": {"topic": "sales"}, "id": "weekly",
            "spec": {"cron": "0 9 * * MON", "timezone": "Europe/Paris"}}))
        assert created["id"] == "weekly" and len(created["next_fires"]) == 3
        assert created["spec"]["timezone"] == "Europe/Paris" and created["policy"]["overlap"] == "skip"

        got = structured(await client.call_tool("schedule_get", {"id": "weekly"}))
        assert len(got["next_fires"]) == 10 and got["revision"] == 1 and got["state"]["paused"] is False
        assert "scheduler_alive_at" in got

        fired = structured(await client.call_tool("schedule_trigger", {"id": "weekly"}))
        record = await orc.watch(fired["run_id"]).wait(10)  # type: ignore[union-attr]
        assert record.outputs == {"e": {"value": "sales schedule"}}
        assert record.trigger is not None and record.trigger["schedule_id"] == "weekly"

        runs = structured(await client.call_tool("run_list", {"schedule_id": "weekly"}))["runs"]
        assert [(r["run_id"], r["trigger"]["schedule_id"]) for r in runs] == [(fired["run_id"], "weekly")]
        history = structured(await client.call_tool("schedule_history", {"id": "weekly"}))
        assert [(f["outcome"], f["run_id"]) for f in history["firings"]] == [("started", fired["run_id"])]

        paused = structured(await client.call_tool("schedule_pause", {"id": "weekly", "note": "holidays"}))
        assert paused["state"] == {"paused": True, "note": "holidays"}
        updated = structured(await client.call_tool("schedule_update", {
            "id": "weekly", "spec": {"every_seconds": 3600}, "if_revision": paused["revision"]}))
        assert updated["revision"] == paused["revision"] + 1

        listing = json.loads((await client.read_resource("ice://schedules")).contents[0].text)  # type: ignore[union-attr]
        assert [s["id"] for s in listing["schedules"]] == ["weekly"]
        one = json.loads((await client.read_resource("ice://schedules/weekly")).contents[0].text)  # type: ignore[union-attr]
        assert one["spec"]["every_seconds"] == 3600

        deleted = structured(await client.call_tool("schedule_delete", {"id": "weekly"}))
        assert deleted == {"id": "weekly", "deleted": True}


@pytest.mark.parametrize(("arguments", "code", "words"), [
    ({"workflow": "daily", "inputs": {"topic": "x"}, "spec": {"cron": "0 9 * * MON", "timezone": "Europe/Pari"}},
     "invalid_schedule", "Europe/Paris"),
    ({"workflow": "daly", "inputs": {"topic": "x"}, "spec": {"every_seconds": 60}}, "invalid_schedule", "daily"),
    ({"workflow": "daily", "inputs": {}, "spec": {"every_seconds": 60}}, "invalid_schedule", "topic"),
    ({"workflow": "daily", "inputs": {"topic": "x"}, "spec": {"cron": "61 * * * *"}}, "invalid_schedule", "cron"),
])
async def test_bad_schedules_are_readable_tool_errors_and_nothing_is_kept(
        orc: Orchestrator, arguments: dict[str, Any], code: str, words: str) -> None:
    async with Client(build_server(orc, make_options())) as client:
        result = await client.call_tool("schedule_create", arguments)
        assert result.is_error is True
        assert structured(result)["error"]["code"] == code
        assert words in text_of(result) and "Traceback" not in text_of(result)
        refused = await client.call_tool("schedule_create", {**arguments, "spec": {"every_seconds": 0.5}})
        assert refused.is_error is True  # the inputSchema says minimum 1
    assert orc.store is not None and orc.store.schedules() == []


async def test_rpc_offers_the_schedule_methods(orc: Orchestrator) -> None:
    methods = rpc_methods(orc, build_server(orc, make_options()).ice_calls)

    async def call(method: str, **params: Any) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        return await handle_rpc(body, methods)

    created = await call("schedule.create", workflow="daily", inputs={"topic": "t"}, spec={"every_seconds": 60},
                         id="nightly")
    assert created["result"]["id"] == "nightly"
    listed = await call("schedule.list")
    assert [s["id"] for s in listed["result"]["schedules"]] == ["nightly"]
    missing = await call("schedule.get", id="nighty")
    assert missing["error"]["data"]["code"] == "unknown_schedule" and "nightly" in missing["error"]["message"]


def test_the_command_line_lists_and_shows_schedules(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "bp"
    folder.mkdir()
    (folder / "ticker.json").write_text(json.dumps({"name": "ticker", "nodes": [
        {"id": "t", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "{{ trigger.kind }}"}}]}))
    common = ["--data-dir", str(tmp_path / "data"), "--blueprints", str(folder)]
    spec = json.dumps({"cron": "*/5 * * * *"})
    assert main(["schedules", "create", "--workflow", "ticker", "--spec", spec, "--id", "five", *common]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "five"
    assert main(["schedules", "list", *common]) == 0
    assert [s["id"] for s in json.loads(capsys.readouterr().out)["schedules"]] == ["five"]
    assert main(["schedules", "show", "five", *common]) == 0
    assert json.loads(capsys.readouterr().out)["spec"] == {"cron": "*/5 * * * *", "timezone": "UTC",
                                                           "jitter_seconds": 0.0}
    assert main(["schedules", "show", "nope", *common]) == 1
    assert "unknown_schedule" in capsys.readouterr().err
