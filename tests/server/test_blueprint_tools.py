"""The blueprint editing tools over MCP (the official client, in memory), /rpc and the command line: versions,
diffs, rollback as a new version, saves that tell two editors of each other, and the editor as an MCP App."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.apps import APP_MIME_TYPE
from mcp_helpers import make_options, structured

from ice_mcp.cli import main
from ice_mcp.operations.blueprint_tools import EDITOR_URI
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.server.web.rpc import RpcCaller, handle_rpc, rpc_methods
from ice_mcp.settings import Settings
from ice_mcp.tools.registry import Registry

V1 = """\
# Says hello.
name: greet
nodes:
  - id: hello
    type: code
    code: return "hello"   # v1
"""
V2 = V1.replace('"hello"   # v1', '"hi"   # v2')
TOOLS = {"blueprint_versions", "blueprint_diff", "blueprint_rollback", "blueprint_save", "blueprint_edit"}


@pytest.fixture
async def orc(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    orchestrator = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    yield orchestrator
    await orchestrator.aclose()


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    error: dict[str, Any] = structured(result)["error"]
    return error


async def test_save_versions_diff_and_rollback_over_mcp(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(listed) >= TOOLS
        assert listed["blueprint_versions"].annotations.read_only_hint is True  # type: ignore[union-attr]
        assert listed["blueprint_rollback"].annotations.read_only_hint is False  # type: ignore[union-attr]

        first = structured(await client.call_tool("blueprint_save", {"name": "greet", "text": V1}))
        assert (first["version"], first["previous_version"], first["created"]) == (1, None, True)
        assert first["report"]["ok"] is True
        second = structured(await client.call_tool("blueprint_save", {"name": "greet", "text": V2, "base_version": 1}))
        assert second["version"] == 2
        ran = structured(await client.call_tool("workflow_greet", {}))
        assert ran["outputs"]["hello"]["result"] == "hi"

        # a second editor that opened version 1 is told of the first's save
        conflict = error_of(await client.call_tool("blueprint_save", {"name": "greet", "text": V1, "base_version": 1}))
        assert conflict["code"] == "version_conflict"
        assert conflict["details"] == {"name": "greet", "base_version": 1, "current_version": 2}

        versions = structured(await client.call_tool("blueprint_versions", {"name": "greet"}))
        assert [(v["version"], v["current"], v["runs"], v["has_text"]) for v in versions["versions"]] == [
            (2, True, 1, True), (1, False, 0, True)]
        diff = structured(await client.call_tool("blueprint_diff", {"name": "greet", "from_version": 1,
                                                                    "to_version": 2}))
        assert diff["compared"] == "text" and diff["changed_lines"] == 2
        assert '+    code: return "hi"   # v2\n' in diff["diff"]

        back = structured(await client.call_tool("blueprint_rollback", {"name": "greet", "version": 1}))
        assert (back["version"], back["previous_version"], back["created"]) == (3, 2, True)
        assert structured(await client.call_tool("workflow_greet", {}))["outputs"]["hello"]["result"] == "hello"
        assert orc.blueprint_version("greet", 3).text == V1

        missing = error_of(await client.call_tool("blueprint_rollback", {"name": "greet", "version": 7}))
        assert missing["code"] == "unknown_version"
        invalid = error_of(await client.call_tool("blueprint_save", {
            "name": "greet", "text": V1.replace("code: return", "cod: return")}))
        assert invalid["code"] == "invalid_blueprint"
        pinned = next(e for e in invalid["details"]["errors"] if e.get("suggestion") == "code")
        assert (pinned["node_id"], pinned["path"], pinned["line"], pinned["column"]) == ("hello", "/nodes/0/cod", 6, 5)


async def test_validation_issues_carry_path_line_and_column(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        report = structured(await client.call_tool("blueprint_validate", {
            "blueprint": V1.replace("    code: return", "    retries: lots\n    code: return")}))
        issue = report["errors"][0]
        assert (issue["node_id"], issue["field"], issue["path"], issue["line"], issue["column"]) == (
            "hello", "retries", "/nodes/0/retries", 6, 5)


async def test_blueprint_edit_opens_the_editor_app(orc: Orchestrator) -> None:
    orc.save_blueprint_text("greet", V1)
    async with Client(build_server(orc, make_options(read_only=True))) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        edit = listed["blueprint_edit"]
        assert edit.meta is not None and edit.meta["ui"] == {"resourceUri": EDITOR_URI}
        assert edit.meta["ui/resourceUri"] == EDITOR_URI
        assert "blueprint_save" not in listed  # a read-only sign-in sees the editor but cannot save

        opened = structured(await client.call_tool("blueprint_edit", {"name": "greet"}))
        assert (opened["name"], opened["version"], opened["format"], opened["text"]) == ("greet", 1, "yaml", V1)
        assert opened["report"]["ok"] is True and [n["id"] for n in opened["graph"]["nodes"]] == ["hello"]
        drafted = structured(await client.call_tool("blueprint_edit", {"blueprint": {"name": "x", "nodes": [
            {"id": "a", "type": "code", "code": "return 1", "retries": "x"}]}}))
        assert drafted["version"] is None and drafted["text"].startswith("name: x\n")
        assert drafted["report"]["errors"][0]["line"] == 6 and drafted["graph"] is None

        resources = {r.uri: r for r in (await client.list_resources()).resources}
        assert resources[EDITOR_URI].mime_type == APP_MIME_TYPE
        read = await client.read_resource(EDITOR_URI)
        html = read.contents[0]
        assert isinstance(html, types.TextResourceContents) and html.mime_type == APP_MIME_TYPE
        assert "data-inline" not in html.text and "<script" in html.text
        assert "blueprint_save" in html.text and "ui/update-model-context" in html.text
        assert not re.search(r"(src|href)=\"(https?:)?//", html.text)  # nothing loaded from anywhere


async def test_rpc_offers_the_version_methods(orc: Orchestrator) -> None:
    methods = rpc_methods(orc, build_server(orc, make_options()).ice_calls)

    async def call(method: str, *, admin: bool = True, **params: Any) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        return await handle_rpc(body, methods, RpcCaller("someone", admin=admin))

    refused = await call("blueprint.save", admin=False, name="greet", text=V1)  # it changes the catalogue
    assert refused["error"]["code"] == -32003 and refused["error"]["data"]["code"] == "forbidden"
    assert (await call("blueprint.save", name="greet", text=V1))["result"]["version"] == 1
    assert (await call("blueprint.save", name="greet", text=V2, base_version=1))["result"]["version"] == 2
    assert [v["version"] for v in (await call("blueprint.versions", name="greet"))["result"]["versions"]] == [2, 1]
    assert (await call("blueprint.diff", name="greet", from_version=2, to_version=1))["result"]["changed_lines"] == 2
    assert (await call("blueprint.rollback", name="greet", version=1))["result"]["version"] == 3
    conflict = await call("blueprint.save", name="greet", text=V2, base_version=2)
    assert conflict["error"]["data"]["code"] == "version_conflict"
    assert (await call("blueprint.edit", name="greet"))["result"]["text"] == V1


def test_the_command_line_rolls_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--data-dir", str(tmp_path / "data")]
    assert main(["blueprints", "save", "greet", V1, *common]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 1
    assert main(["blueprints", "save", "greet", V2, "--base-version", "1", *common]) == 0
    capsys.readouterr()
    assert main(["blueprints", "rollback", "greet", "1", *common]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == 3
    assert main(["blueprints", "versions", "greet", *common]) == 0
    assert [v["current"] for v in json.loads(capsys.readouterr().out)["versions"]] == [True, False, False]
    assert main(["blueprints", "diff", "greet", "1", "2", *common]) == 0
    assert '-    code: return "hello"   # v1' in json.loads(capsys.readouterr().out)["diff"]
    assert main(["blueprints", "rollback", "greet", "9", *common]) == 1
    assert "unknown_version" in capsys.readouterr().err
