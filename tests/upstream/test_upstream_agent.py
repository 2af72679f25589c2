"""An agent (OpenAI's SDK against the aimock LLM mock) calls a tool of a real upstream MCP server."""

from __future__ import annotations

import pytest
from llm_mock import Aimock
from upstream_servers import Connect, time_server

from ice_mcp.llm import LLMConfig, LLMService

pytestmark = pytest.mark.usefixtures("servers_installed")


async def test_an_agent_calls_an_upstream_tool_under_its_provider_safe_name(connect: Connect, aimock: Aimock) -> None:
    service = LLMService(LLMConfig.load(env={"OPENAI_API_KEY": "test", "OPENAI_BASE_URL": f"{aimock.url}/v1"}))
    orc = await connect({"time": time_server()}, llm=service)
    agent = {"model": "gpt-4o-mini", "system": "You tell the time.", "tools": ["time.get_current_time"]}
    asking = {"name": "ask_time", "nodes": [{"id": "clock", "type": "agent", "agent": agent,
                                             "input": "what time is it in Tokyo?"}]}
    assert orc.validate(asking).ok
    record = await orc.run(asking)
    assert record.status == "succeeded", record.error
    output = record.nodes["clock"].output
    assert output["text"] == "It is the time the time server said, in Tokyo."
    [call] = output["tool_calls"]
    assert (call["name"], call["arguments"]) == ("time__get_current_time", {"timezone": "Asia/Tokyo"})
    assert call["result"]["timezone"] == "Asia/Tokyo" and call["result"]["datetime"].endswith("+09:00")

    requests = [e["body"] for e in aimock.journal() if "what time is it in Tokyo" in str(e.get("body"))]
    offered = requests[0]["tools"][0]["function"]
    assert offered["name"] == "time__get_current_time"
    assert offered["parameters"]["required"] == ["timezone"]  # the upstream's own schema
    assert call["result"]["datetime"] in str(requests[-1]["messages"][-1])  # the upstream answer reached the model
