"""blueprint_draft against the LLM mock with scripted drafts: the validator's issues go back to the model until the
draft validates, each attempt recorded; attempts run out as `draft_invalid`. In Python, over MCP (the official SDK
client), /rpc and the command line; and the draft_workflow prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from drafts import GOAL, HOPELESS
from llm_mock import Aimock
from mcp import Client
from mcp_helpers import make_options, structured

from ice_mcp import Orchestrator
from ice_mcp.cli import main
from ice_mcp.drafting import draft_blueprint
from ice_mcp.errors import IceError
from ice_mcp.server import build_server
from ice_mcp.server.web.rpc import handle_rpc, rpc_methods


def _requests(mock: Aimock, marker: str) -> list[dict[str, Any]]:
    """The chat requests aimock received whose first user message holds `marker`, oldest first."""
    found = []
    for entry in mock.journal():
        messages = (entry.get("body") or {}).get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        if users and marker in str(users[0].get("content")):
            found.append(entry["body"])
    return found


def _check_repaired(answer: dict[str, Any], orc: Orchestrator) -> None:
    attempts = answer["attempts"]
    assert [a["valid"] for a in attempts] == [False, True]
    assert attempts[0]["issues"] == 2 and attempts[1]["issues"] == 0
    assert [(a["input_tokens"], a["output_tokens"]) for a in attempts] == [(1500, 200), (1900, 180)]
    assert answer["usage"]["input_tokens"] == 3400 and answer["usage"]["cost_usd"] > 0
    assert all(a["cost_usd"] > 0 for a in attempts)
    assert orc.validate(answer["blueprint"]).ok
    assert answer["blueprint"]["nodes"][0]["tool_name"] == "csv_reader"
    assert "assumptions" not in answer["blueprint"]
    assert answer["estimate"] == {"llm_calls_min": 0, "llm_calls_max": 0, "usd_min": 0.0, "usd_max": 0.0}
    assumes = answer["assumes"]
    assert assumes["placeholders"] == [{"path": "/inputs/properties/recipient/default",
                                        "what": "who reads the count"}]
    assert assumes["todos"] == ["check the delimiter"]
    assert assumes["missing_tools"] == ["a mailer for the recipient"]
    assert assumes["invented_inputs"] == ["recipient"]  # the goal names the path, not a recipient


async def test_the_validators_issues_go_back_until_the_draft_validates(orc: Orchestrator, draft_mock: Aimock) -> None:
    before = len(_requests(draft_mock, "GOAL-REPAIR"))
    result = await draft_blueprint(orc, GOAL)
    _check_repaired(result.as_dict(), orc)
    assert "csv_reader" in result.yaml and "<PLACEHOLDER: who reads the count>" in result.yaml

    requests = _requests(draft_mock, "GOAL-REPAIR")[before:]
    assert len(requests) == 2
    system = requests[0]["messages"][0]
    assert system["role"] == "system" and "- csv_reader(path*: string" in system["content"]
    assert "Node fields" in system["content"] and "<PLACEHOLDER: what is missing>" in system["content"]
    second = requests[1]["messages"]
    assert second[-2]["role"] == "assistant" and "csv_read " in second[-2]["content"]
    repair = second[-1]["content"]
    sent = [json.loads(line) for line in repair.splitlines() if line.startswith("{")]
    assert {(i["code"], i["node"], i["path"], i.get("suggestion")) for i in sent} == {
        ("unknown_tool", "read", "tool_name", "csv_reader"), ("unknown_input", "read", "tool_args", "path")}
    # The loop's own time per attempt, beside the model's (reported, never asserted: a loaded machine is slow).
    for attempt in result.attempts:
        print(f"attempt {attempt.number}: model {attempt.model_ms:.1f} ms, loop overhead {attempt.overhead_ms:.2f} ms")


async def test_attempts_run_out_as_draft_invalid_with_the_last_issues(orc: Orchestrator) -> None:
    with pytest.raises(IceError) as raised:
        await draft_blueprint(orc, HOPELESS, {"max_attempts": 3})
    error = raised.value
    assert error.code == "draft_invalid" and "no tool named 'teleport'" in error.message
    assert [i["code"] for i in error.details["issues"]] == ["unknown_tool"]
    assert [(a["valid"], a["input_tokens"]) for a in error.details["attempts"]] == [(False, 1400)] * 3
    assert "teleport" in error.details["last_draft"]


async def test_over_mcp_with_the_official_client(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options())) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["blueprint_draft"].input_schema["required"] == ["goal"]
        answer = structured(await client.call_tool("blueprint_draft", {"goal": GOAL}))
        _check_repaired(answer, orc)
        assert answer["diagram"].startswith("flowchart TD") and "read --> count" in answer["diagram"]

        failed = await client.call_tool("blueprint_draft", {"goal": HOPELESS, "constraints": {"max_attempts": 2}})
        assert failed.is_error is True
        error = (failed.structured_content or {})["error"]
        assert error["code"] == "draft_invalid" and len(error["details"]["attempts"]) == 2

        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert "draft_workflow" in prompts
        prompt = await client.get_prompt("draft_workflow", {"goal": "email the weekly totals"})
        text = prompt.messages[0].content
        assert isinstance(text, types.TextContent)
        assert "email the weekly totals" in text.text and "blueprint_validate" in text.text
        assert "- csv_reader(path*: string" in text.text


async def test_over_rpc(orc: Orchestrator) -> None:
    methods = rpc_methods(orc, build_server(orc, make_options()).ice_calls)

    async def call(**params: Any) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "blueprint.draft", "params": params}).encode()
        return await handle_rpc(body, methods)

    _check_repaired((await call(goal=GOAL))["result"], orc)
    failed = await call(goal=HOPELESS, constraints={"max_attempts": 1})
    assert failed["error"]["data"]["code"] == "draft_invalid"
    assert failed["error"]["data"]["details"]["issues"][0]["suggestion"] is None


def test_at_the_command_line(tmp_path: Path, draft_mock: Aimock, monkeypatch: pytest.MonkeyPatch,
                             capsys: pytest.CaptureFixture[str]) -> None:
    for name, value in draft_mock.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("ICE_MCP_DEFAULT_MODEL", raising=False)
    common = ["--data-dir", str(tmp_path / "data"), "--workspace", str(tmp_path / "ws")]
    assert main(["draft", GOAL, *common]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [a["valid"] for a in answer["attempts"]] == [False, True] and answer["name"] == "count_rows"
    assert main(["draft", HOPELESS, "--constraints", '{"max_attempts": 1}', *common]) == 1
    assert "error [draft_invalid]" in capsys.readouterr().err
